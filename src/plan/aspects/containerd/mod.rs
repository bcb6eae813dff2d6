//! containerd in one room, as nodeadm keeps it in one folder: its config file's grammar as the
//! agent reads it (`config`: versions 2 to 4, the sandbox image and socket, image names, the
//! content store, the image cache's record), the TOML the agent writes for it (`pull`: the CRI
//! pull settings as a NodeConfig fragment and AL2's template), the hand-off's part that writes
//! containerd's files on both families (`render`: the registries' `hosts.toml`, AL2's
//! config), and the settings that make containerd's part of the intent or plan around it:
//! `images` (pull settings), `pause` (the sandbox image pinned), `image_cache` (the baked
//! images checked), `registries` (the registries in the intent). Running `ctr` is the
//! operating system's shelf (`os::ctr`): this room is pure, like the rest of the plan.

pub mod config;
pub mod image_cache;
pub mod images;
pub mod pause;
pub mod pull;
pub mod registries;
pub mod render;
