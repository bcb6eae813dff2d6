//! Command-line interface.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "eks-nodeinit",
    version,
    about = "First-boot agent for EKS worker nodes: validate, plan, apply, hand off to bootstrap.sh or nodeadm",
    long_about = "First-boot agent for EKS worker nodes. `init` reads the config (default /etc/eks-nodeinit/config.json) and the instance metadata (IMDSv2), validates everything, plans every change, then tags the instance with a unique Name, applies sysctls, patches the kubelet config (Amazon Linux 2), writes a systemd-logind drop-in, and hands the node to EKS: exec of /etc/eks/bootstrap.sh on Amazon Linux 2, a NodeConfig drop-in in /etc/eks/nodeadm.d/ for nodeadm on Amazon Linux 2023. `init --dry-run` prints the plan and changes nothing.\n\nExit status: 0 success, 1 failure, 2 usage error, 3 invalid config, 4 no config in any --config source (nothing done), 5 the config file cannot be read (missing or no permission; nothing done). A report of each run is written to /var/lib/eks-nodeinit/report.json.",
    propagate_version = true
)]
pub struct Cli {
    /// More logging (-v debug, -vv trace).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Only warnings and errors.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Log line format (logs go to standard error).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Output {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Configure this node and hand it to EKS (the first-boot job).
    Init(InitArgs),
    /// Check a config file without touching anything; exit 0 when valid, 3 when not.
    Validate(ValidateArgs),
    /// Run the checks that read only the node (kernel settings, noexec mounts, SELinux, FIPS),
    /// as the next boot will see it, changing nothing; exit 0 when none failed, 1 when one did.
    /// Where the AMI is built (the Packer template runs it).
    Check(CheckArgs),
    /// Print the max pods and kube-reserved a node of this type would get, offline: the same
    /// computation as `init` (the VPC CNI's calculator, bootstrap.sh's reservation).
    MaxPods(MaxPodsArgs),
    /// Wait while the instance is warmed in an Auto Scaling warm pool, then have systemd run the
    /// agent's unit again, which hands off (the packaged eks-nodeinit-await-service.service, after
    /// a run that held the hand-off; returns at once when nothing is held in this boot).
    #[command(hide = true)]
    AwaitService(AwaitServiceArgs),
    /// Prove the join and complete this boot's Auto Scaling launch lifecycle hook (the packaged
    /// eks-nodeinit-launch-hook.service, after the agent's unit): in service, once kubelet is
    /// active, wait for the Node to be Ready as planned (verify.join), then CONTINUE, or ABANDON
    /// on the deadline or a mismatch; at once when the instance was prepared for a warm pool;
    /// returns at once when the run left no job (/run/eks-nodeinit/join.json,
    /// /run/eks-nodeinit/launch-hook.json).
    #[command(hide = true)]
    CompleteHook(CompleteHookArgs),
    /// Run this boot's checks before the kubelet starts (the packaged eks-nodeinit-gate.service,
    /// after the agent's unit and the drivers' units, before nodeadm-run): their results and
    /// the Node conditions they name go into the report; a failed check stops nothing. Returns
    /// at once when the run left no job (/run/eks-nodeinit/gate.json).
    #[command(hide = true)]
    Gate(GateArgs),
    /// How this node's boot went: the join's phases, the preflight's checks, the verdict and its
    /// causes with what to do (from /var/lib/eks-nodeinit/report.json).
    Status(StatusArgs),
    /// Record that this instance's first boot is done (the packaged unit's ExecStartPost):
    /// writes /var/lib/eks-nodeinit/done, unless this boot's run held the hand-off for a warm
    /// pool (/run/eks-nodeinit/handoff-held), so the boot after the start into service runs again.
    #[command(hide = true)]
    MarkDone(MarkDoneArgs),
    /// Check that containerd holds its sandbox (pause) image, and label it pinned where the AMI
    /// did not, so the kubelet's image garbage collection keeps it (the packaged drop-ins run it
    /// once the image is in containerd's store: after sandbox-image.service on AL2,
    /// containerd.service on AL2023). The name and socket come from /etc/containerd/config.toml
    /// (config versions 2 to 4).
    PinSandboxImage(PinSandboxArgs),
    /// At AMI bake time: pull images into containerd's store (the CRI's namespace) and record
    /// each with its digest in /etc/eks-nodeinit/image-cache.json, which every boot's plan
    /// checks (present as baked, or pulled at first use instead).
    BakeImages(BakeImagesArgs),
    /// Background continuation of tagging (started by `init`; not for direct use).
    #[command(hide = true)]
    TagContinue(TagContinueArgs),
    /// Write the man page and shell completions into a directory (used when packaging).
    #[command(hide = true)]
    Generate(GenerateArgs),
}

#[derive(Debug, clap::Args)]
pub struct GenerateArgs {
    /// Output directory: man pages (eks-nodeinit*.8), completions (eks-nodeinit.bash,
    /// _eks-nodeinit, eks-nodeinit.fish) and the config's JSON Schema (config.schema.json).
    #[arg(long)]
    pub out: PathBuf,
}

/// Write the man page (section 8: a system administration command) and completions.
pub fn generate(out: &std::path::Path) -> std::io::Result<()> {
    use clap::CommandFactory;
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("config.schema.json"), crate::config::json_schema())?;
    let cmd = Cli::command();
    let man = clap_mangen::Man::new(cmd.clone()).section("8");
    let mut buf = Vec::new();
    man.render(&mut buf)?;
    std::fs::write(out.join("eks-nodeinit.8"), buf)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("eks-nodeinit-{}", sub.get_name());
        let page = clap_mangen::Man::new(sub.clone().name(name.clone())).section("8");
        let mut buf = Vec::new();
        page.render(&mut buf)?;
        std::fs::write(out.join(format!("{name}.8")), buf)?;
    }
    for (shell, name) in [
        (clap_complete::Shell::Bash, "eks-nodeinit.bash"),
        (clap_complete::Shell::Zsh, "_eks-nodeinit"),
        (clap_complete::Shell::Fish, "eks-nodeinit.fish"),
    ] {
        let mut f = std::fs::File::create(out.join(name))?;
        clap_complete::generate(shell, &mut cmd.clone(), "eks-nodeinit", &mut f);
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Where the config is: a file, `-` (standard input), or `imds://user-data` (the instance's
    /// user data: its one `application/vnd.eks-nodeinit+json` MIME part, or the whole user data
    /// as the JSON config; with --metadata, the file's userData). Repeat to try several in order:
    /// the first that holds a config is used, a missing file or user data without one is passed
    /// over, and when none holds one init exits 4 having done nothing.
    #[arg(long, value_name = "SOURCE", default_value = crate::config::DEFAULT_CONFIG_PATH)]
    pub config: Vec<PathBuf>,
    /// Root of the node's filesystem: every path the agent reads or writes is under it.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Instance metadata from a JSON file instead of IMDS (dev boxes, tests).
    #[arg(long)]
    pub metadata: Option<PathBuf>,
    /// How to print the plan.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// D-Bus address for telling systemd-logind. Default: the system bus when --root is `/`;
    /// with another root, logind is only told when this is given.
    #[arg(long)]
    pub system_bus_address: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Config file; `-` reads standard input.
    #[arg(long, default_value = crate::config::DEFAULT_CONFIG_PATH)]
    pub config: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct MaxPodsArgs {
    /// The EC2 instance type, e.g. m5.large.
    #[arg(long)]
    pub instance_type: String,
    /// How the VPC CNI gives pods addresses.
    #[arg(long, value_enum, default_value_t = CniArg::SecondaryIPs)]
    pub cni: CniArg,
    /// The VPC CNI's custom networking: the primary ENI carries no pods.
    #[arg(long)]
    pub custom_networking: bool,
    /// The CNI's MAX_ENI: at most this many ENIs for pods.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_enis: Option<u64>,
    /// `recommended` (110, or 250 with more than 30 vCPUs), `none`, or a number.
    #[arg(long, default_value = "recommended", value_parser = parse_ceiling)]
    pub ceiling: crate::base::podcap::Ceiling,
    /// The type's vCPUs (the recommended ceiling and kube-reserved's CPU depend on them).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub vcpus: Option<u64>,
    /// A Xen type (prefix delegation needs Nitro; the calculator then counts secondary IPs).
    #[arg(long)]
    pub xen: bool,
    /// The type's ENIs on its default network card, for a type not in the table.
    #[arg(long, requires = "ipv4_per_eni", value_parser = clap::value_parser!(u32).range(1..))]
    pub enis: Option<u32>,
    /// The type's IPv4 addresses per ENI, for a type not in the table.
    #[arg(long, requires = "enis", value_parser = clap::value_parser!(u32).range(1..))]
    pub ipv4_per_eni: Option<u32>,
    /// How to print the answer.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum CniArg {
    #[value(name = "secondaryIPs")]
    SecondaryIPs,
    #[value(name = "prefixDelegation")]
    PrefixDelegation,
    /// The VPC CNI's IPv6 mode: one /80 prefix per node; the ceiling sets max pods.
    #[value(name = "ipv6")]
    Ipv6,
}

fn parse_ceiling(s: &str) -> Result<crate::base::podcap::Ceiling, String> {
    use crate::base::podcap::{Ceiling, KUBELET_MAX};
    match s {
        "recommended" => Ok(Ceiling::Recommended),
        "none" => Ok(Ceiling::None),
        n => match n.parse::<u64>() {
            Ok(n) if (1..=KUBELET_MAX).contains(&n) => Ok(Ceiling::Fixed(n)),
            _ => Err(format!(
                "use recommended, none or a number from 1 to {KUBELET_MAX}"
            )),
        },
    }
}

impl MaxPodsArgs {
    pub fn question(&self) -> crate::base::podcap::explain::Question {
        use crate::base::podcap::{Cni, Mode, TypeInfo};
        crate::base::podcap::explain::Question {
            instance_type: self.instance_type.clone(),
            mode: Mode {
                cni: match self.cni {
                    CniArg::SecondaryIPs => Cni::SecondaryIps,
                    CniArg::PrefixDelegation => Cni::PrefixDelegation,
                    CniArg::Ipv6 => Cni::Ipv6,
                },
                custom_networking: self.custom_networking,
                max_enis: self.max_enis,
                ceiling: self.ceiling,
            },
            vcpus: self.vcpus,
            xen: self.xen,
            info: self
                .enis
                .zip(self.ipv4_per_eni)
                .map(|(enis, ipv4_per_eni)| TypeInfo { enis, ipv4_per_eni }),
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct AwaitServiceArgs {
    /// Root of the node's filesystem (where the hold marker is).
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// The unit to run again once the instance is in service.
    #[arg(long, default_value = "eks-nodeinit.service")]
    pub unit: String,
    /// Milliseconds between two reads of the target lifecycle state, plus up to half as much
    /// again at random (100 to 300000).
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(100..=300_000))]
    pub interval_ms: u64,
    /// D-Bus address of systemd. Default: the system bus.
    #[arg(long)]
    pub system_bus_address: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct CompleteHookArgs {
    /// Root of the node's filesystem (where the job is).
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Seconds kubelet.service may take to be active (1 to 3600).
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub kubelet_wait_sec: u64,
    /// Seconds the Auto Scaling calls may retry (1 to 3600).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub deadline_sec: u64,
    /// D-Bus address of systemd. Default: the system bus.
    #[arg(long)]
    pub system_bus_address: Option<String>,
    /// Milliseconds between two reads of the Node while proving the join (100 to 60000).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(100..=60000))]
    pub poll_ms: u64,
    /// Seconds between two heartbeats of the launch hook while the join is proven (1 to 3600):
    /// a proof longer than the hook's heartbeat timeout keeps the launch waiting.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub heartbeat_sec: u64,
    /// How many times a node that retires itself tries (0, the default: until the instance is
    /// gone); between two tries the wait doubles from --retire-retry-ms to 5 minutes.
    #[arg(long, default_value_t = 0)]
    pub retire_attempts: u32,
    /// Milliseconds before a failed retirement is tried again (100 to 300000).
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(100..=300000))]
    pub retire_retry_ms: u64,
}

#[derive(Debug, clap::Args)]
pub struct BakeImagesArgs {
    /// An image to bake (repeat for more), as a pod names it.
    #[arg(long, required = true)]
    pub image: Vec<String>,
    /// Root of the node's filesystem.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// containerd's client.
    #[arg(long, default_value = "ctr")]
    pub ctr: String,
    /// Pull over plain HTTP (a registry on loopback or a local mirror).
    #[arg(long)]
    pub plain_http: bool,
}

#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// Root of the node's filesystem.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct PinSandboxArgs {
    /// Root of the node's filesystem.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// containerd's client.
    #[arg(long, default_value = "ctr")]
    pub ctr: String,
}

#[derive(Debug, clap::Args)]
pub struct MarkDoneArgs {
    /// Root of the node's filesystem.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct TagContinueArgs {
    /// The node root; the job itself comes as JSON on standard input.
    #[arg(long)]
    pub root: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The agent's config, as the node will read it; absent: the checks of the defaults.
    #[arg(long, default_value = crate::config::DEFAULT_CONFIG_PATH)]
    pub config: PathBuf,
    /// Root of the node's filesystem: `/` on the build instance, or a node image's root.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// `text` (one line a check) or `json`.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Root of the node's filesystem (where the report is).
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// `text` for a person, `json` (the report's `join` section) for tools.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}
