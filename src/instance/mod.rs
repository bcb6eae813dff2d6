//! The instance as EC2 describes it to itself: IMDSv2 (`imds`), the metadata the plan uses
//! (`metadata`), the Auto Scaling lifecycle state (`lifecycle`) and the user data as nodeadm
//! reads it (`userdata`).

pub mod imds;
pub mod lifecycle;
pub mod metadata;
pub mod userdata;
