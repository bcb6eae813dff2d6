use std::process::ExitCode;

use clap::Parser;
use eks_nodeinit::commands::cli::{Cli, Command, LogFormat};
use eks_nodeinit::{base::findings::Invalid, base::logging, commands, config::ConfigError};

/// Exit codes: 0 success, 1 failure, 2 usage (clap), 3 invalid config, 4 no config in any
/// `--config` source (nothing done), 5 the config file could not be read (missing, no
/// permission: nothing was wrong with a config; nothing done).
const EXIT_INVALID: u8 = 3;
const EXIT_NO_CONFIG: u8 = 4;
const EXIT_UNREADABLE_CONFIG: u8 = 5;

/// Logs on standard error: colour on a terminal only, sd-daemon priority prefixes under the
/// journal, plain lines in a file or a pipe (src/logging.rs).
fn init_logging(cli: &Cli) -> logging::Logs {
    let level = if cli.quiet {
        "warn"
    } else {
        match cli.verbose {
            0 => "info",
            1 => "debug",
            _ => "trace",
        }
    };
    logging::init(
        &format!("eks_nodeinit={level},warn"),
        cli.log_format == LogFormat::Json,
    )
}

/// Parse the command line; under the journal a usage error is logged at error priority.
fn parse_cli() -> Cli {
    Cli::try_parse().unwrap_or_else(|e| {
        if e.use_stderr() && logging::Stderr::detect() == logging::Stderr::Journal {
            logging::Logs {
                stderr: logging::Stderr::Journal,
            }
            .error(&e.render().to_string());
            std::process::exit(e.exit_code());
        }
        e.exit()
    })
}

/// The AWS SDK's TLS stack loads the platform's root certificates through rustls-native-certs,
/// which reads the CA bundle *and* every file in /etc/ssl/certs (hundreds on Debian) unless
/// SSL_CERT_FILE names a bundle. Point it at the distribution's bundle — the same certificates —
/// unless the operator chose a trust store. Runs before any thread exists.
fn prefer_ca_bundle() {
    if std::env::var_os("SSL_CERT_FILE").is_some() || std::env::var_os("SSL_CERT_DIR").is_some() {
        return;
    }
    for bundle in [
        "/etc/pki/tls/certs/ca-bundle.crt",   // Amazon Linux, RHEL family
        "/etc/ssl/certs/ca-certificates.crt", // Debian family
    ] {
        if std::path::Path::new(bundle).is_file() {
            std::env::set_var("SSL_CERT_FILE", bundle);
            return;
        }
    }
}

fn main() -> ExitCode {
    prefer_ca_bundle();
    let cli = parse_cli();
    let logs = init_logging(&cli);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            logs.error(&format!("error: cannot start the async runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        match &cli.command {
            Command::Init(a) => commands::init(a).await,
            Command::Validate(a) => commands::validate_cmd(&a.config),
            Command::Check(a) => commands::check(a).await,
            Command::MaxPods(a) => commands::max_pods(a),
            Command::MarkDone(a) => commands::mark_done(&a.root),
            Command::AwaitService(a) => commands::await_service(a).await,
            Command::CompleteHook(a) => commands::complete_hook(a).await,
            Command::Gate(a) => commands::gate(&a.root).await,
            Command::Status(a) => commands::status(a),
            Command::PinSandboxImage(a) => commands::pin_sandbox_image(a).await,
            Command::BakeImages(a) => commands::bake_images(a).await,
            Command::TagContinue(a) => commands::tag_continue(&a.root).await,
            Command::Generate(a) => {
                eks_nodeinit::commands::cli::generate(&a.out).map_err(Into::into)
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The chain, each cause once.
            logs.error(&format!(
                "error: {}",
                eks_nodeinit::base::text::join_chain(e.chain())
            ));
            if e.downcast_ref::<commands::NoConfig>().is_some() {
                ExitCode::from(EXIT_NO_CONFIG)
            } else if matches!(
                e.downcast_ref::<ConfigError>(),
                Some(ConfigError::Read { .. })
            ) {
                ExitCode::from(EXIT_UNREADABLE_CONFIG)
            } else if e.downcast_ref::<Invalid>().is_some()
                || e.downcast_ref::<ConfigError>().is_some()
            {
                ExitCode::from(EXIT_INVALID)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
