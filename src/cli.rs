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
