"""moto's server with Auto Scaling's CompleteLifecycleAction and RecordLifecycleActionHeartbeat,
which moto (5.2) does not implement.

The action is checked against moto's own Auto Scaling model the way Auto Scaling checks it: the
group must exist, hold the instance, and have a launch hook of that name
(autoscaling:EC2_INSTANCE_LAUNCHING); the result must be CONTINUE or ABANDON; and each launch can
be completed once: a second call for the same instance and hook is Auto Scaling's
ValidationError "No active Lifecycle Action found with instance ID ...". Every accepted call is
appended as one JSON line (with the Host it was called by) to the file MOTO_LIFECYCLE_LOG names,
for the tests to count and read.

RecordLifecycleActionHeartbeat is checked the same way (a launch still waiting on the hook) and
appended as one JSON line to the file MOTO_HEARTBEAT_LOG names, when it names one.

SetInstanceHealth, TerminateInstances and CreateTags are moto's own, each call appended in order
as one JSON line ({"Action": ..., "Host": the name it was called by, the call's parameters}) to
the file MOTO_CALL_LOG names, when it names one, before moto answers it. MOTO_DENY_TERMINATE=1 makes TerminateInstances answer as
EC2 does a role without the permission (UnauthorizedOperation), changing nothing;
MOTO_DENY_TAG_KEY=<key> does the same for a CreateTags of that key (dry run or not).

Usage: python3 lifecycle_actions.py [moto.server arguments]
"""

import json
import os
import sys

from moto.autoscaling.exceptions import ValidationError
from moto.autoscaling.responses import AutoScalingResponse
from moto.core.responses import EmptyResult
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.responses.instances import InstanceResponse
from moto.ec2.responses.tags import TagResponse
from moto.server import main

_completed = set()


def complete_lifecycle_action(self):
    group_name = self._get_param("AutoScalingGroupName")
    hook_name = self._get_param("LifecycleHookName")
    instance_id = self._get_param("InstanceId")
    result = self._get_param("LifecycleActionResult")
    if result not in ("CONTINUE", "ABANDON"):
        raise ValidationError(f"Invalid LifecycleActionResult {result}")
    _waiting(self.autoscaling_backend, group_name, hook_name, instance_id)
    key = (group_name, hook_name, instance_id)
    _completed.add(key)
    with open(os.environ["MOTO_LIFECYCLE_LOG"], "a") as log:
        log.write(
            json.dumps(
                {
                    "AutoScalingGroupName": group_name,
                    "LifecycleHookName": hook_name,
                    "InstanceId": instance_id,
                    "LifecycleActionResult": result,
                    "Host": self.headers.get("Host"),
                }
            )
            + "\n"
        )
    return EmptyResult()


def _waiting(backend, group_name, hook_name, instance_id):
    """Raise Auto Scaling's ValidationError unless a launch of the instance waits on the hook."""
    group = backend.autoscaling_groups.get(group_name)
    if group is None:
        raise ValidationError(f"Group {group_name} not found")
    hooks = [
        h
        for h in backend.describe_lifecycle_hooks(group_name, [hook_name])
        if h.lifecycle_transition == "autoscaling:EC2_INSTANCE_LAUNCHING"
    ]
    members = {s.instance.id for s in group.instance_states}
    if not hooks or instance_id not in members or (group_name, hook_name, instance_id) in _completed:
        raise ValidationError(
            f"No active Lifecycle Action found with instance ID {instance_id}"
        )


def record_lifecycle_action_heartbeat(self):
    group_name = self._get_param("AutoScalingGroupName")
    hook_name = self._get_param("LifecycleHookName")
    instance_id = self._get_param("InstanceId")
    _waiting(self.autoscaling_backend, group_name, hook_name, instance_id)
    path = os.environ.get("MOTO_HEARTBEAT_LOG")
    if path:
        with open(path, "a") as log:
            log.write(
                json.dumps(
                    {
                        "AutoScalingGroupName": group_name,
                        "LifecycleHookName": hook_name,
                        "InstanceId": instance_id,
                    }
                )
                + "\n"
            )
    return EmptyResult()


def _denied_tag(self):
    """Whether the CreateTags call names the key MOTO_DENY_TAG_KEY gives (a role whose policy
    lacks that key in `aws:TagKeys`)."""
    key = os.environ.get("MOTO_DENY_TAG_KEY")
    tags = self._get_param("Tags") or []
    return bool(key) and any(t.get("Key") == key for t in tags)


def _logged(action, original, params, deny=None):
    """`original` with each call appended to MOTO_CALL_LOG first (and refused when `deny`, the
    name of a variable set to 1, or a function of the request, says so)."""

    def call(self):
        path = os.environ.get("MOTO_CALL_LOG")
        if path:
            entry = {"Action": action, "Host": self.headers.get("Host")}
            entry.update({p: self._get_param(p) for p in params})
            with open(path, "a") as log:
                log.write(json.dumps(entry) + "\n")
        refused = deny(self) if callable(deny) else deny and os.environ.get(deny) == "1"
        if refused:
            raise EC2ClientError(
                "UnauthorizedOperation",
                "You are not authorized to perform this operation.",
            )
        return original(self)

    return call


AutoScalingResponse.set_instance_health = _logged(
    "SetInstanceHealth",
    AutoScalingResponse.set_instance_health,
    ["InstanceId", "HealthStatus", "ShouldRespectGracePeriod"],
)
InstanceResponse.terminate_instances = _logged(
    "TerminateInstances",
    InstanceResponse.terminate_instances,
    ["InstanceIds"],
    deny="MOTO_DENY_TERMINATE",
)
TagResponse.create_tags = _logged(
    "CreateTags",
    TagResponse.create_tags,
    ["Resources", "Tags", "DryRun"],
    deny=_denied_tag,
)
AutoScalingResponse.complete_lifecycle_action = complete_lifecycle_action
AutoScalingResponse.record_lifecycle_action_heartbeat = record_lifecycle_action_heartbeat

if __name__ == "__main__":
    main(sys.argv[1:])
