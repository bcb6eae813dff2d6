//! The host's AWS side of the VM e2e (main.rs): moto behind a TLS terminator, and the tag
//! mirror into IMDS.

use super::*;

/// The EC2 side: moto (recording every request) on loopback, a TLS terminator in front of it
/// with a certificate for EC2_HOST, and one run-instances instance.
pub(super) struct Ec2 {
    pub(super) _moto: Moto,
    pub(super) _tls: Proc,
    pub(super) tls_port: u16,
    pub(super) recording: PathBuf,
    /// Each CompleteLifecycleAction moto took (tests/moto/lifecycle_actions.py).
    pub(super) hook_log: PathBuf,
    pub(super) client: aws_sdk_ec2::Client,
    pub(super) instance_id: String,
    pub(super) private_ip: String,
}

/// A TLS terminator (socat) listening on `listen` (`PORT,bind=ADDR[,pf=ip6]`) with `crt` and
/// `key`, in front of moto at `moto`.
pub(super) fn tls_front(listen: &str, moto: &str, crt: &Path, key: &Path) -> Proc {
    let moto_port = moto.rsplit(':').next().unwrap();
    Proc(
        Command::new("socat")
            .arg(format!(
                "OPENSSL-LISTEN:{listen},reuseaddr,fork,verify=0,cert={},key={}",
                crt.display(),
                key.display()
            ))
            .arg(format!("TCP:127.0.0.1:{moto_port}"))
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

impl Ec2 {
    pub(super) fn start(rt: &tokio::runtime::Runtime, dir: &Path, crt: &Path, key: &Path) -> Ec2 {
        let recording = dir.join("moto-recording.jsonl");
        let hook_log = dir.join("completed.jsonl");
        let script = common::manifest_dir().join("tests/moto/lifecycle_actions.py");
        let moto = start_moto_as(
            &[script.to_str().unwrap()],
            &[
                ("MOTO_ENABLE_RECORDING", "1"),
                ("MOTO_RECORDER_FILEPATH", recording.to_str().unwrap()),
                ("MOTO_LIFECYCLE_LOG", hook_log.to_str().unwrap()),
            ],
        )
        .expect("moto[server] is installed (make deps)");
        let tls_port = free_port();
        let tls = tls_front(&format!("{tls_port},bind=127.0.0.1"), &moto.url, crt, key);
        let client = rt.block_on(ec2_client(&moto.url, REGION));
        let (instance_id, private_ip) = rt.block_on(run_instance(&client));
        Ec2 {
            instance_id,
            private_ip,
            _moto: moto,
            _tls: tls,
            tls_port,
            recording,
            hook_log,
            client,
        }
    }

    /// The EC2 actions moto served so far (from its request recording), dry runs left out.
    pub(super) fn actions(&self) -> Vec<String> {
        recorded_bodies(&self.recording)
            .iter()
            // A dry run (the fleet guard's check before the hand-off) changes nothing.
            .filter(|body| !body.split('&').any(|kv| kv == "DryRun=true"))
            .filter_map(|body| {
                body.split('&')
                    .find_map(|kv| kv.strip_prefix("Action="))
                    .map(str::to_string)
            })
            .collect()
    }

    pub(super) fn count(&self, action: &str) -> usize {
        self.actions().iter().filter(|a| *a == action).count()
    }

    /// Parameter Store calls of `operation` moto served (JSON protocol: the X-Amz-Target header).
    pub(super) fn ssm_count(&self, operation: &str) -> usize {
        let target = format!("AmazonSSM.{operation}");
        std::fs::read_to_string(&self.recording)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| {
                e["headers"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .any(|(k, v)| k.eq_ignore_ascii_case("x-amz-target") && v == &target)
            })
            .count()
    }

    pub(super) fn tags(
        &self,
        rt: &tokio::runtime::Runtime,
    ) -> Result<BTreeMap<String, String>, String> {
        rt.block_on(instance_tags(&self.client, &self.instance_id))
    }
}

/// Instance-metadata tags show the instance's EC2 tags: mirror moto's into the IMDS server
/// (beside the launch-time tags above) until dropped.
pub(super) struct TagMirror(
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    Option<std::thread::JoinHandle<()>>,
);

impl TagMirror {
    pub(super) fn start(rt: &tokio::runtime::Runtime, ec2: &Ec2, imds: &ImdsServer) -> TagMirror {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, handle, client, id, state) = (
            stop.clone(),
            rt.handle().clone(),
            ec2.client.clone(),
            ec2.instance_id.clone(),
            imds.state.clone(),
        );
        let t = std::thread::spawn(move || {
            let base = state.lock().unwrap().tags.clone().unwrap_or_default();
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(now) = handle.block_on(instance_tags(&client, &id)) {
                    let mut tags = base.clone();
                    tags.extend(now);
                    state.lock().unwrap().tags = Some(tags);
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        TagMirror(stop, Some(t))
    }
}

impl Drop for TagMirror {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.1.take() {
            let _ = t.join();
        }
    }
}
