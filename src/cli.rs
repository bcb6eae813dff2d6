//! Command-line interface.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "eks-nodeinit",
    version,
    about = "First-boot agent for EKS worker nodes: validate, plan, apply, hand off to bootstrap.sh or nodeadm",
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
}

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Config file; `-` reads standard input.
    #[arg(long, default_value = crate::config::DEFAULT_CONFIG_PATH)]
    pub config: PathBuf,
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
    #[arg(long)]
    pub root: PathBuf,
    #[arg(long)]
    pub region: String,
    #[arg(long)]
    pub instance_id: String,
    #[arg(long)]
    pub value: String,
    #[arg(long)]
    pub deadline_sec: u64,
    #[arg(long)]
    pub endpoint: Option<String>,
    /// The foreground run already knew the instance's tags (the Name differed): go straight
    /// to CreateTags instead of reading them again.
    #[arg(long)]
    pub tags_known: bool,
    /// Wait this long before the first call (the drawn spread delay).
    #[arg(long, default_value_t = 0)]
    pub initial_delay_ms: u64,
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
