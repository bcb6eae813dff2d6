//! Parameter Store: the values under a path (`GetParametersByPath`, every page) or by full
//! names (`GetParameters`), decrypted. One function per remote call, each under the discovery
//! deadline with the agent's retry policy.

use tokio::time::Instant;

use crate::aws;
use crate::base::retry::RetryPolicy;
use crate::base::text::printable;
use crate::spec::discovery::Value;

use super::{not_found_path, retried, Answer, Calls, Found, Origin, SourceError};

/// The parameters named `names` (endpoint, CA, CIDR) directly under `path`.
pub(super) async fn by_path(
    ssm: &aws_sdk_ssm::Client,
    path: &str,
    names: &[String; 3],
    deadline: Instant,
    calls: &mut Calls,
) -> Result<Answer, SourceError> {
    let statement = format!(
        "{} (and kms:Decrypt on the key of a SecureString)",
        aws::statement(
            "ssm:GetParametersByPath",
            &format!("\"arn:aws:ssm:<region>:<account>:parameter{path}\"")
        )
    );
    let mut answer = Answer::default();
    let mut token: Option<String> = None;
    // Pages of up to 10 parameters; the path holds a handful.
    for _page in 0..100 {
        let out = retried(
            "GetParametersByPath",
            &statement,
            RetryPolicy::default(),
            deadline,
            &mut calls.get_parameters_by_path,
            || {
                ssm.get_parameters_by_path()
                    .path(path)
                    .recursive(false)
                    .with_decryption(true)
                    .set_next_token(token.clone())
                    .send()
            },
        )
        .await
        .map_err(|e| match e {
            SourceError::NotFound { .. } => not_found_path(path),
            e => e,
        })?;
        for p in out.parameters() {
            if let (Some(full), Some(value)) = (p.name(), p.value()) {
                take_leaf(&mut answer, path, names, full, value);
            }
        }
        token = out.next_token().map(String::from).filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    if answer == Answer::default() {
        return Err(not_found_path(path));
    }
    Ok(answer)
}

/// A parameter under the path whose last part is one of `names`.
fn take_leaf(answer: &mut Answer, path: &str, names: &[String; 3], full: &str, value: &str) {
    let leaf = full.rsplit('/').next().unwrap_or(full);
    for (v, name) in Value::ALL.iter().zip(names) {
        if leaf == name {
            let origin = Origin::SsmPath {
                path: path.to_string(),
                name: name.clone(),
            };
            answer.set(
                *v,
                Found {
                    value: value.trim().to_string(),
                    origin,
                },
            );
        }
    }
}

/// The parameters of these full names (endpoint, CA, CIDR; `None`: not asked here).
pub(super) async fn parameters(
    ssm: &aws_sdk_ssm::Client,
    names: &[Option<String>; 3],
    deadline: Instant,
    calls: &mut Calls,
) -> Result<Answer, SourceError> {
    let wanted: Vec<String> = names.iter().flatten().cloned().collect();
    let arns: Vec<String> = wanted
        .iter()
        .map(|n| {
            let slash = if n.starts_with('/') { "" } else { "/" };
            format!("\"arn:aws:ssm:<region>:<account>:parameter{slash}{n}\"")
        })
        .collect();
    let statement = format!(
        "{} (and kms:Decrypt on the key of a SecureString)",
        aws::statement("ssm:GetParameters", &format!("[{}]", arns.join(",")))
    );
    let out = retried(
        "GetParameters",
        &statement,
        RetryPolicy::default(),
        deadline,
        &mut calls.get_parameters,
        || {
            ssm.get_parameters()
                .set_names(Some(wanted.clone()))
                .with_decryption(true)
                .send()
        },
    )
    .await?;
    let mut answer = Answer::default();
    for p in out.parameters() {
        let (Some(full), Some(value)) = (p.name(), p.value()) else {
            continue;
        };
        for (v, name) in Value::ALL.iter().zip(names) {
            if name.as_deref() == Some(full) {
                let origin = Origin::SsmParameter { name: full.into() };
                answer.set(
                    *v,
                    Found {
                        value: value.trim().to_string(),
                        origin,
                    },
                );
            }
        }
    }
    let invalid = out.invalid_parameters();
    if !invalid.is_empty() && answer == Answer::default() {
        let shown: Vec<String> = invalid.iter().map(|n| printable(n)).collect();
        return Err(SourceError::NotFound {
            what: format!("parameters {}", shown.join(", ")),
            hint: "create them (docs/discovery.md) or fix cluster.discovery.sources".into(),
        });
    }
    Ok(answer)
}
