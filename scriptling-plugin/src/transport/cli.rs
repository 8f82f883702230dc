//! The command line of a plugin binary served with `Plugin::run`: with no
//! arguments it serves a host over stdio; a few flags make it describe
//! itself instead, or serve TCP, a Unix socket or HTTP.

/// What the binary was asked to do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Command {
    /// Serve: stdio, or a socket or HTTP when `--listen` (or its variable)
    /// is given.
    Serve,
    /// `--describe`: print the exports with their signatures and help.
    Describe,
    /// `--schema`: print the handshake answer as JSON.
    Schema,
    /// `--version`: print the library's name and version.
    Version,
    /// `--help`: print the usage.
    Help,
}

/// The flags that take a value (the transports', read by `TcpConfig` and
/// `HttpConfig`).
const WITH_VALUE: &[&str] = &["--listen", "--path"];

/// Reads the arguments (without the program name). Arguments the SDK does
/// not know are refused with the usage, unless `others_allowed` (the plugin
/// takes arguments of its own: `Plugin::own_args`).
pub(crate) fn parse(args: &[String], others_allowed: bool) -> Result<Command, String> {
    let mut command = Command::Serve;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        let asked = match arg {
            "--describe" => Some(Command::Describe),
            "--schema" => Some(Command::Schema),
            "--version" | "-V" => Some(Command::Version),
            "--help" | "-h" => Some(Command::Help),
            _ if WITH_VALUE.contains(&arg) => {
                i += 1;
                None
            }
            _ if WITH_VALUE.iter().any(|f| arg.strip_prefix(f).is_some_and(|rest| rest.starts_with('='))) => None,
            _ if others_allowed => None,
            other => return Err(format!("unknown argument `{other}`")),
        };
        if let Some(asked) = asked {
            if command != Command::Serve {
                return Err(format!("`{arg}` cannot be combined with another of --describe, --schema, --version"));
            }
            command = asked;
        }
        i += 1;
    }
    Ok(command)
}

/// The usage text, for `--help` and after an argument error.
pub(crate) fn usage() -> String {
    let program = program_name();
    let http = cfg!(feature = "http");
    let mut text = format!(
        "usage: {program} [--describe | --schema | --version | --help] [--listen ADDR{}]\n\n\
         With no arguments the plugin serves a Scriptling host over stdin and stdout\n\
         (line-delimited JSON-RPC 2.0); Scriptling starts it this way.\n\n\
         \x20 --describe     print the functions, classes and constants with their help\n\
         \x20 --schema       print the handshake answer (the schema) as JSON\n\
         \x20 --version      print the library's name and version\n\
         \x20 --listen tcp://HOST:PORT | unix:/PATH\n\
         \x20                serve line-delimited JSON-RPC on a socket instead (hello, ping,\n\
         \x20                tools/call, tools/list, and the Scriptling protocol)\n",
        if http { " [--path PATH]" } else { "" }
    );
    if http {
        text.push_str(
            "  --listen ADDR  serve over HTTP instead, on ADDR (`127.0.0.1:8081`, or a port)\n\
             \x20 --path PATH    the HTTP endpoint (default /json-rpc)\n",
        );
    }
    text
}

/// The program's name for the usage line: the file name it was run as,
/// without `.exe` on Windows (where it is typed without it).
fn program_name() -> String {
    let name = std::env::args()
        .next()
        .and_then(|p| std::path::Path::new(&p).file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "plugin".to_owned());
    match name.strip_suffix(std::env::consts::EXE_SUFFIX) {
        Some(stem) if !stem.is_empty() => stem.to_owned(),
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_strs(args: &[&str], others: bool) -> Result<Command, String> {
        parse(&args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>(), others)
    }

    #[test]
    fn flags_select_a_command_and_http_flags_pass_through() {
        assert_eq!(parse_strs(&[], false), Ok(Command::Serve));
        assert_eq!(parse_strs(&["--describe"], false), Ok(Command::Describe));
        assert_eq!(parse_strs(&["--schema"], false), Ok(Command::Schema));
        assert_eq!(parse_strs(&["-V"], false), Ok(Command::Version));
        assert_eq!(parse_strs(&["--listen", "8081", "--path", "/rpc"], false), Ok(Command::Serve));
        assert_eq!(parse_strs(&["--listen=8081"], false), Ok(Command::Serve));
    }

    #[test]
    fn unknown_arguments_are_refused_unless_the_plugin_takes_its_own() {
        assert_eq!(parse_strs(&["--descibe"], false), Err("unknown argument `--descibe`".to_owned()));
        assert_eq!(parse_strs(&["data.db"], false), Err("unknown argument `data.db`".to_owned()));
        assert_eq!(parse_strs(&["data.db", "--verbose"], true), Ok(Command::Serve));
        assert_eq!(parse_strs(&["data.db", "--describe"], true), Ok(Command::Describe));
        assert!(parse_strs(&["--schema", "--describe"], false).unwrap_err().contains("cannot be combined"));
    }
}
