//! The same-work floor: a separate, minimal process (this bench binary started again with
//! `STARTUP_FLOOR=1`; no AWS SDK, no config parsing, no planning) that does what the agent does
//! on the bench's node, the cheapest way: the IMDSv2 token and the same concurrent reads (the
//! agent's eight paths and each instance tag), the instance role's credentials (two GETs), one
//! CreateTags signed with SigV4, the run lock, the three live sysctls, the same files written
//! atomically with fsync (kubelet config and its backup, sysctl.d, logind drop-in, the pause
//! image's drop-in, containerd's config for bootstrap.sh and the AMI's template kept, the
//! proof's job, the steps after the hand-off, the hand-off's marker, report), then `execv` of
//! the same bootstrap.sh.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use sha2::{Digest, Sha256};

type Http = Client<HttpConnector, Full<Bytes>>;

async fn call(c: &Http, req: hyper::Request<Full<Bytes>>) -> (u16, String) {
    let resp = c.request(req).await.expect("request");
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

async fn get(c: &Http, imds: &str, token: &str, path: &str) -> String {
    let req = hyper::Request::get(format!("{imds}/latest/{path}"))
        .header("x-aws-ec2-metadata-token", token)
        .body(Full::new(Bytes::new()))
        .unwrap();
    call(c, req).await.1
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn hmac(key: &[u8], msg: &[u8]) -> Vec<u8> {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |b: u8| k.iter().map(|x| x ^ b).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .to_vec()
}

/// `YYYYMMDDTHHMMSSZ` for now (civil-from-days, no date crate).
fn amz_date() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A SigV4-signed EC2 Query API POST.
fn signed(
    url: &str,
    region: &str,
    creds: &(String, String, Option<String>),
    body: &str,
) -> hyper::Request<Full<Bytes>> {
    let host = url
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .trim_end_matches('/');
    let date = amz_date();
    let day = &date[..8];
    let ctype = "application/x-www-form-urlencoded; charset=utf-8";
    let mut headers = vec![
        ("content-type", ctype.to_string()),
        ("host", host.to_string()),
        ("x-amz-date", date.clone()),
    ];
    if let Some(t) = &creds.2 {
        headers.push(("x-amz-security-token", t.clone()));
    }
    let canon_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let signed_headers = headers
        .iter()
        .map(|(k, _)| *k)
        .collect::<Vec<_>>()
        .join(";");
    let canonical = format!(
        "POST\n/\n\n{canon_headers}\n{signed_headers}\n{}",
        hex(&Sha256::digest(body))
    );
    let scope = format!("{day}/{region}/ec2/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{date}\n{scope}\n{}",
        hex(&Sha256::digest(&canonical))
    );
    let mut key = hmac(format!("AWS4{}", creds.1).as_bytes(), day.as_bytes());
    for part in [region, "ec2", "aws4_request"] {
        key = hmac(&key, part.as_bytes());
    }
    let sig = hex(&hmac(&key, to_sign.as_bytes()));
    let mut req = hyper::Request::post(url.to_string());
    for (k, v) in &headers {
        req = req.header(*k, v);
    }
    req.header(
        "authorization",
        format!("AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={sig}", creds.0),
    )
    .body(Full::new(Bytes::from(body.to_string())))
    .unwrap()
}

/// Write every file beside its target, fsync them together (a thread each), then rename each
/// into place and fsync its directory: the agent's two phases, done the cheapest way.
fn write_all_atomic(files: Vec<(PathBuf, Vec<u8>)>) {
    let staged: Vec<(PathBuf, PathBuf, std::fs::File)> = files
        .into_iter()
        .map(|(path, content)| {
            let dir = path.parent().unwrap();
            std::fs::create_dir_all(dir).unwrap();
            let name = path.file_name().unwrap().to_string_lossy();
            let tmp = dir.join(format!(".{name}.floor.tmp"));
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&tmp)
                .unwrap();
            f.write_all(&content).unwrap();
            (path, tmp, f)
        })
        .collect();
    std::thread::scope(|s| {
        for (_, _, f) in &staged {
            s.spawn(move || f.sync_all().unwrap());
        }
    });
    for (path, tmp, f) in staged {
        drop(f);
        std::fs::rename(&tmp, &path).unwrap();
        let dir = path.parent().unwrap();
        std::fs::File::open(dir).unwrap().sync_all().unwrap();
    }
}

/// Run the floor's work in this process and exec bootstrap.sh. Never returns.
pub fn run(imds: &str, ec2: &str, root: &Path, role: bool) -> ! {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let lockf = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(root.join("run-floor.lock"))
        .unwrap();
    let _lock = nix::fcntl::Flock::lock(lockf, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|_| ())
        .unwrap();
    let (region, id, ip) = rt.block_on(read_and_tag(imds, ec2, role));
    write_node(root, &region, &id, &ip);
    exec_bootstrap(root)
}

/// The IMDS reads (token, metadata, tags, the role's credentials) and the signed CreateTags:
/// the instance's region, id and address.
async fn read_and_tag(imds: &str, ec2: &str, role: bool) -> (String, String, String) {
    let c: Http = Client::builder(TokioExecutor::new()).build_http();
    let req = hyper::Request::put(format!("{imds}/latest/api/token"))
        .header("x-aws-ec2-metadata-token-ttl-seconds", "21600")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let token = call(&c, req).await.1;
    let paths = [
        "meta-data/instance-id",
        "meta-data/local-ipv4",
        "meta-data/ipv6",
        "meta-data/instance-type",
        "meta-data/placement/region",
        "meta-data/placement/availability-zone",
        "meta-data/tags/instance",
        "user-data",
    ];
    let mut tasks = Vec::new();
    for p in paths {
        let (c, imds, token) = (c.clone(), imds.to_string(), token.clone());
        tasks.push(tokio::spawn(async move { get(&c, &imds, &token, p).await }));
    }
    let mut v = Vec::new();
    for t in tasks {
        v.push(t.await.unwrap());
    }
    let mut tag_tasks = Vec::new();
    for k in v[6].lines().map(str::to_string) {
        let (c, imds, token) = (c.clone(), imds.to_string(), token.clone());
        tag_tasks.push(tokio::spawn(async move {
            get(&c, &imds, &token, &format!("meta-data/tags/instance/{k}")).await
        }));
    }
    for t in tag_tasks {
        t.await.unwrap();
    }
    let creds = if role {
        let name = get(&c, imds, &token, "meta-data/iam/security-credentials/").await;
        let doc: serde_json::Value = serde_json::from_str(
            &get(
                &c,
                imds,
                &token,
                &format!("meta-data/iam/security-credentials/{}", name.trim()),
            )
            .await,
        )
        .unwrap();
        let s = |k: &str| doc[k].as_str().unwrap().to_string();
        (s("AccessKeyId"), s("SecretAccessKey"), Some(s("Token")))
    } else {
        (
            std::env::var("AWS_ACCESS_KEY_ID").unwrap(),
            std::env::var("AWS_SECRET_ACCESS_KEY").unwrap(),
            None,
        )
    };
    let (id, ip, region) = (
        v[0].trim().to_string(),
        v[1].trim().to_string(),
        v[4].trim().to_string(),
    );
    let value = format!("scaler-{}", ip.replace('.', "x"));
    let body = format!(
        "Action=CreateTags&Version=2016-11-15&ResourceId.1={id}&Tag.1.Key=Name&Tag.1.Value={value}"
    );
    let (status, text) = call(&c, signed(ec2, &region, &creds, &body)).await;
    assert!(status == 200, "CreateTags: {status} {text}");
    (region, id, ip)
}

/// The sysctls set, the files written atomically, the report.
fn write_node(root: &Path, region: &str, id: &str, ip: &str) {
    for (k, v) in [
        ("fs/inotify/max_user_watches", "524288"),
        ("fs/inotify/max_user_instances", "8192"),
        ("vm/max_map_count", "262144"),
    ] {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(root.join("proc/sys").join(k))
            .unwrap();
        f.write_all(format!("{v}\n").as_bytes()).unwrap();
    }
    let kpath = root.join("etc/kubernetes/kubelet/kubelet-config.json");
    let old = std::fs::read_to_string(&kpath).unwrap();
    let close = old.rfind('}').unwrap();
    let new = format!("{},\n  \"imageGCHighThresholdPercent\": 80,\n  \"imageGCLowThresholdPercent\": 60,\n  \"shutdownGracePeriod\": \"90s\",\n  \"shutdownGracePeriodCriticalPods\": \"30s\"\n}}\n", old[..close].trim_end());
    let mut files = vec![
        (
            root.join("etc/kubernetes/kubelet/kubelet-config.json.orig"),
            old.clone().into_bytes(),
        ),
        (kpath, new.into_bytes()),
        (
            root.join("etc/sysctl.d/99-zz-eks-nodeinit.conf"),
            b"fs.inotify.max_user_instances = 8192\nfs.inotify.max_user_watches = 524288\nvm.max_map_count = 262144\n".to_vec(),
        ),
        (
            root.join("etc/systemd/logind.conf.d/99-zz-eks-nodeinit.conf"),
            b"[Login]\nInhibitDelayMaxSec=90\n".to_vec(),
        ),
    ];
    files.extend(per_boot(root, region, id));
    let report = serde_json::json!({"instanceId": id, "region": region, "address": ip, "handoff": "exec bootstrap.sh"});
    files.push((
        root.join("var/lib/eks-nodeinit/report.json"),
        report.to_string().into_bytes(),
    ));
    write_all_atomic(files);
}

/// The pause image's drop-in, containerd's config for bootstrap.sh (the node's template, as the
/// agent writes it with the pull settings) and the AMI's template kept beside it, the per-boot
/// jobs and the hand-off's marker.
fn per_boot(root: &Path, region: &str, id: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let template = std::fs::read(root.join("etc/eks/containerd/containerd-config.toml")).unwrap();
    let join = serde_json::json!({"cluster": "prod-eu", "region": region, "instanceId": id, "deadlineSecs": 300, "expect": {"labels": {"node.kubernetes.io/role": "scaler"}, "pods": 29}});
    let after = serde_json::json!({"steps": [{"purpose": "the sandbox image pinned", "argv": ["/usr/bin/eks-nodeinit", "pin-sandbox-image"], "timeoutSecs": 120, "what": "not pinned"}]});
    let run = root.join("run/eks-nodeinit");
    vec![
        (
            root.join("etc/systemd/system/sandbox-image.service.d/90-eks-nodeinit-pin.conf"),
            b"[Service]\nExecStartPost=-/usr/bin/eks-nodeinit pin-sandbox-image\n".to_vec(),
        ),
        (
            root.join("etc/eks-nodeinit/containerd-config.ami.toml"),
            template.clone(),
        ),
        (
            root.join("etc/eks-nodeinit/containerd-config.toml"),
            template,
        ),
        (run.join("join.json"), join.to_string().into_bytes()),
        (
            run.join("after-handoff.json"),
            after.to_string().into_bytes(),
        ),
        (
            run.join("bootstrap-exec"),
            format!("{} {id}\n", std::process::id()).into_bytes(),
        ),
    ]
}

/// Become bootstrap.sh.
fn exec_bootstrap(root: &Path) -> ! {
    let argv: Vec<CString> = [
        root.join("etc/eks/bootstrap.sh").display().to_string(),
        "prod-eu".into(),
        "--kubelet-extra-args".into(),
        "--node-labels=node.kubernetes.io/role=scaler".into(),
    ]
    .into_iter()
    .map(|a| CString::new(a).unwrap())
    .collect();
    let e = nix::unistd::execv(&argv[0], &argv);
    panic!("exec bootstrap.sh: {e:?}");
}
