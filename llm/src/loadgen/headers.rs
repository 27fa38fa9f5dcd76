//! The extra request headers: given in clear (`--header Name: value`), or by the name of
//! an environment variable that holds the value (`--header-env Name=VARIABLE`), so that a
//! credential never appears on the command line, in a log or in a record. Errors name
//! the header and the variable, never the value.

use anyhow::{Context as _, bail};

/// `--header` values as request-head lines (`Name: value\r\n`).
pub fn literal(headers: &[String]) -> anyhow::Result<String> {
    let mut head = String::new();
    for header in headers {
        let (name, value) = header
            .split_once(':')
            .with_context(|| format!("--header {header:?}: expected `Name: value`"))?;
        if name.trim().is_empty() || header.contains(['\r', '\n']) {
            bail!("--header {header:?}: invalid header");
        }
        head.push_str(&format!("{}: {}\r\n", name.trim(), value.trim()));
    }
    Ok(head)
}

/// `--header-env` values (`Name=VARIABLE`) as request-head lines, each value read with
/// `lookup` (the process environment, in the tool).
pub fn from_environment(
    header_envs: &[String],
    lookup: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<String> {
    let mut head = String::new();
    for entry in header_envs {
        let (name, variable) = entry
            .split_once('=')
            .with_context(|| format!("--header-env {entry:?}: expected `Name=VARIABLE`"))?;
        let (name, variable) = (name.trim(), variable.trim());
        if name.is_empty() || variable.is_empty() || !name.bytes().all(is_token_byte) {
            bail!("--header-env {entry:?}: expected an HTTP header name and a variable name");
        }
        let Some(value) = lookup(variable) else {
            bail!(
                "header {name}: the environment variable {variable} that holds its value is not set"
            );
        };
        if value.contains(['\r', '\n']) {
            bail!("header {name}: the value in {variable} contains a line break");
        }
        head.push_str(&format!("{name}: {}\r\n", value.trim()));
    }
    Ok(head)
}

/// RFC 9110's `tchar`.
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(variable: &str) -> Option<String> {
        match variable {
            "AZURE_KEY" => Some("s3cret\n".trim().to_owned()),
            "BROKEN" => Some("a\r\nInjected: yes".to_owned()),
            _ => None,
        }
    }

    #[test]
    fn a_header_from_the_environment_carries_its_value() {
        assert_eq!(
            from_environment(&["api-key=AZURE_KEY".into()], lookup).expect("resolved"),
            "api-key: s3cret\r\n"
        );
        assert_eq!(
            literal(&["X-Team: perf".into()]).expect("literal"),
            "X-Team: perf\r\n"
        );
    }

    #[test]
    fn errors_name_the_header_and_variable_never_the_value() {
        let unset = from_environment(&["api-key=UNSET".into()], lookup)
            .expect_err("unset")
            .to_string();
        assert!(
            unset.contains("api-key") && unset.contains("UNSET"),
            "{unset}"
        );
        let broken = from_environment(&["X-Key=BROKEN".into()], lookup)
            .expect_err("line break")
            .to_string();
        assert!(broken.contains("line break"), "{broken}");
        assert!(!broken.contains("Injected"), "{broken}");
        for malformed in ["api-key", "=AZURE_KEY", "api key=AZURE_KEY", "api-key="] {
            assert!(
                from_environment(&[malformed.into()], lookup).is_err(),
                "{malformed}"
            );
        }
        assert!(literal(&["no colon".into()]).is_err());
        assert!(literal(&["X: a\r\nB: c".into()]).is_err());
    }
}
