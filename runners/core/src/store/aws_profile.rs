//! The AWS shared files, which the `object_store` crate does not read: a profile's
//! credentials and settings from `~/.aws/credentials` and `~/.aws/config` (or
//! `AWS_SHARED_CREDENTIALS_FILE` and `AWS_CONFIG_FILE`), the profile named by
//! `AWS_PROFILE` or `default`. The order is the AWS SDKs': the environment
//! (`AWS_ACCESS_KEY_ID`, `AWS_REGION`, `AWS_ENDPOINT_URL`...) first, then the profile,
//! then what `object_store` finds itself (web identity, the container's or the
//! instance's credentials).
//!
//! A profile's static keys, session token, region and endpoint are read. A profile
//! that gets its credentials another way (`role_arn`, `credential_process`, `sso_*`)
//! is refused, naming what it uses, rather than passed over for whatever else
//! answers; an `AWS_PROFILE` that neither file holds is refused too.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// What a profile holds that a job uses.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Profile {
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    pub region: Option<String>,
    pub endpoint_url: Option<String>,
}

/// Settings a profile may hold that get credentials in ways not read here.
const NOT_READ: [&str; 6] = [
    "role_arn",
    "credential_process",
    "sso_session",
    "sso_start_url",
    "web_identity_token_file",
    "credential_source",
];

/// The sections of an AWS shared file: name → key → value. Comment lines (`#`, `;`)
/// and nested settings (indented lines under a key with no value) are skipped.
fn sections(text: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let nested = line.starts_with([' ', '\t']);
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.trim().to_string();
            out.entry(name.clone()).or_default();
            current = Some(name);
            continue;
        }
        if nested {
            continue;
        }
        if let (Some(section), Some((k, v))) = (&current, line.split_once('=')) {
            out.entry(section.clone())
                .or_default()
                .insert(k.trim().to_lowercase(), v.trim().to_string());
        }
    }
    out
}

/// Profile `name` from the credentials file's and the config file's texts (a key in
/// the credentials file wins); `Ok(None)` if neither has it.
pub(crate) fn profile_from(
    credentials: Option<&str>,
    config: Option<&str>,
    name: &str,
) -> Result<Option<Profile>, String> {
    let from_credentials = credentials.map(sections).and_then(|mut s| s.remove(name));
    // The config file names a profile `[profile NAME]`, except `[default]`.
    let from_config = config.map(sections).and_then(|mut s| {
        s.remove(&format!("profile {name}"))
            .or_else(|| (name == "default").then(|| s.remove("default")).flatten())
    });
    if from_credentials.is_none() && from_config.is_none() {
        return Ok(None);
    }
    let mut keys = from_config.unwrap_or_default();
    keys.extend(from_credentials.unwrap_or_default());
    let get = |k: &str| keys.get(k).filter(|v| !v.is_empty()).cloned();
    let profile = Profile {
        access_key_id: get("aws_access_key_id"),
        secret_access_key: get("aws_secret_access_key"),
        session_token: get("aws_session_token"),
        region: get("region"),
        endpoint_url: get("endpoint_url"),
    };
    if profile.access_key_id.is_none() {
        if let Some(other) = NOT_READ.iter().find(|k| keys.contains_key(**k)) {
            return Err(format!(
                "AWS profile '{name}' gets its credentials with {other}, which Tidewater does not read: give the job credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) or a profile with aws_access_key_id"
            ));
        }
    }
    if profile.access_key_id.is_some() != profile.secret_access_key.is_some() {
        return Err(format!(
            "AWS profile '{name}' has one of aws_access_key_id and aws_secret_access_key without the other"
        ));
    }
    Ok(Some(profile))
}

/// The profile the environment `env` selects, read from its files; `Ok(None)` if
/// there is none (no files, or no `default` profile in them).
pub(crate) fn selected(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<Profile>, String> {
    let home = env("HOME").map(PathBuf::from);
    let file = |var: &str, default: &str| {
        env(var)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(default)))
    };
    let read = |path: Option<PathBuf>| -> Result<Option<String>, String> {
        let Some(path) = path else { return Ok(None) };
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    };
    let credentials = read(file("AWS_SHARED_CREDENTIALS_FILE", "credentials"))?;
    let config = read(file("AWS_CONFIG_FILE", "config"))?;
    let asked = env("AWS_PROFILE").filter(|p| !p.is_empty());
    let name = asked.clone().unwrap_or_else(|| "default".into());
    match profile_from(credentials.as_deref(), config.as_deref(), &name)? {
        Some(p) => Ok(Some(p)),
        None if asked.is_some() => Err(format!(
            "AWS_PROFILE names profile '{name}', which neither the credentials nor the config file holds"
        )),
        None => Ok(None),
    }
}

/// `builder` (made from the environment) with what the selected profile adds where the
/// environment says nothing.
pub(crate) fn apply(
    mut builder: object_store::aws::AmazonS3Builder,
) -> Result<object_store::aws::AmazonS3Builder, String> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let Some(p) = selected(&env)? else {
        return Ok(builder);
    };
    if env("AWS_ACCESS_KEY_ID").is_none() {
        if let (Some(id), Some(secret)) = (p.access_key_id, p.secret_access_key) {
            builder = builder
                .with_access_key_id(id)
                .with_secret_access_key(secret);
            if let Some(token) = p.session_token {
                builder = builder.with_token(token);
            }
        }
    }
    if env("AWS_REGION").is_none() && env("AWS_DEFAULT_REGION").is_none() {
        if let Some(region) = p.region {
            builder = builder.with_region(region);
        }
    }
    if env("AWS_ENDPOINT").is_none() && env("AWS_ENDPOINT_URL").is_none() {
        if let Some(endpoint) = p.endpoint_url {
            if endpoint.starts_with("http://") {
                builder = builder.with_allow_http(true);
            }
            builder = builder.with_endpoint(endpoint);
        }
    }
    Ok(builder)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CREDENTIALS: &str = "\
# keys
[default]
aws_access_key_id = AKIADEFAULT
aws_secret_access_key = secret-default

[ci]
aws_access_key_id=AKIACI
aws_secret_access_key=secret-ci
aws_session_token = token-ci
";

    const CONFIG: &str = "\
[default]
region = eu-west-1
s3 =
    max_concurrent_requests = 20
endpoint_url = http://127.0.0.1:9000

[profile ci]
region = us-east-2
; a comment
[profile assumed]
role_arn = arn:aws:iam::123456789012:role/job
source_profile = default
";

    #[test]
    fn a_profile_joins_its_keys_and_its_settings_from_both_files() {
        assert_eq!(
            profile_from(Some(CREDENTIALS), Some(CONFIG), "default").unwrap(),
            Some(Profile {
                access_key_id: Some("AKIADEFAULT".into()),
                secret_access_key: Some("secret-default".into()),
                session_token: None,
                region: Some("eu-west-1".into()),
                endpoint_url: Some("http://127.0.0.1:9000".into()),
            })
        );
        assert_eq!(
            profile_from(Some(CREDENTIALS), Some(CONFIG), "ci").unwrap(),
            Some(Profile {
                access_key_id: Some("AKIACI".into()),
                secret_access_key: Some("secret-ci".into()),
                session_token: Some("token-ci".into()),
                region: Some("us-east-2".into()),
                endpoint_url: None,
            })
        );
        assert_eq!(
            profile_from(Some(CREDENTIALS), None, "missing").unwrap(),
            None
        );
    }

    #[test]
    fn a_profile_that_assumes_a_role_is_refused_naming_how() {
        let e = profile_from(Some(CREDENTIALS), Some(CONFIG), "assumed").unwrap_err();
        assert!(e.contains("'assumed'") && e.contains("role_arn"), "{e}");
        let half = "[default]\naws_access_key_id = A\n";
        let e = profile_from(Some(half), None, "default").unwrap_err();
        assert!(e.contains("without the other"), "{e}");
    }

    #[test]
    fn the_environment_picks_the_files_and_the_profile() {
        let dir = tempfile::tempdir().unwrap();
        let aws = dir.path().join(".aws");
        std::fs::create_dir(&aws).unwrap();
        std::fs::write(aws.join("credentials"), CREDENTIALS).unwrap();
        std::fs::write(dir.path().join("other-config"), CONFIG).unwrap();
        let home = dir.path().display().to_string();
        let config = dir.path().join("other-config").display().to_string();
        let env = |profile: Option<&'static str>| {
            let (home, config) = (home.clone(), config.clone());
            move |k: &str| match k {
                "HOME" => Some(home.clone()),
                "AWS_CONFIG_FILE" => Some(config.clone()),
                "AWS_PROFILE" => profile.map(String::from),
                _ => None,
            }
        };
        let p = selected(&env(None)).unwrap().unwrap();
        assert_eq!(p.access_key_id.as_deref(), Some("AKIADEFAULT"));
        assert_eq!(p.region.as_deref(), Some("eu-west-1"));
        let p = selected(&env(Some("ci"))).unwrap().unwrap();
        assert_eq!(p.session_token.as_deref(), Some("token-ci"));
        let e = selected(&env(Some("nope"))).unwrap_err();
        assert!(e.contains("'nope'"), "{e}");
        // No files at all: nothing, not an error.
        let nothing = |k: &str| (k == "HOME").then(|| "/nonexistent-home".to_string());
        assert_eq!(selected(&nothing).unwrap(), None);
    }
}
