//! The `lifecycle` section: the launch lifecycle hook's name, checked as Auto Scaling names
//! hooks; `warmPool` is an enum serde has already checked.

use crate::base::findings::Findings;
use crate::config::LifecycleSettings;

/// The launch hook to complete (`lifecycle.completeLaunchHook`), when its name is one Auto
/// Scaling accepts.
pub fn launch_hook(l: &LifecycleSettings, f: &mut Findings) -> Option<String> {
    l.complete_launch_hook.clone().filter(|h| {
        f.check(
            "lifecycle.completeLaunchHook",
            crate::instance::lifecycle::check_hook_name(h),
        )
        .is_some()
    })
}
