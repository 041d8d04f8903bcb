//! `allowedPaths`: globs over resolved paths. A pattern is relative to the workspace (or
//! absolute); a path is allowed when it, or a directory containing it, matches one of them
//! (`src` and `src/**` both allow everything under `src`; `**/*.md` allows Markdown files
//! anywhere). Paths are resolved before they are judged (see `Sandbox::absolute`), so
//! `src/../secret` and a symlink out of `src/` are judged by where they lead. The glob rules are
//! the native Glob's (`globset` with a literal separator).

use globset::{GlobBuilder, GlobMatcher};

use crate::glob::is_glob_meta;

struct Rule {
  matcher: GlobMatcher,
  /// The literal leading directory of the pattern (`/ws/src/lib` of `/ws/src/lib/**/*.ts`).
  prefix: String,
}

pub struct PathPolicy {
  rules: Vec<Rule>,
}

fn dirname(p: &str) -> &str {
  match p.rfind('/') {
    Some(0) => "/",
    Some(i) => &p[..i],
    None => ".",
  }
}

/// The literal leading directories of a pattern, and its last part when that is literal too.
fn literal_prefix(pattern: &str) -> String {
  let parts: Vec<&str> = pattern.split('/').collect();
  let mut out: Vec<&str> = Vec::new();
  for part in &parts[..parts.len() - 1] {
    if part.contains(is_glob_meta) {
      break;
    }
    out.push(part);
  }
  let last = parts[parts.len() - 1];
  if !last.contains(is_glob_meta) && out.len() == parts.len() - 1 {
    out.push(last);
  }
  let joined = out.join("/");
  if joined.is_empty() {
    "/".into()
  } else {
    joined
  }
}

fn compile(pattern: &str) -> Result<GlobMatcher, String> {
  GlobBuilder::new(pattern)
    .literal_separator(true)
    .backslash_escape(true)
    .build()
    .map(|g| g.compile_matcher())
    .map_err(|e| e.to_string())
}

impl PathPolicy {
  /// `None` without `allowedPaths`; an invalid pattern is an error naming it.
  pub fn new(allowed: Option<&[String]>, root: Option<&str>) -> Result<Option<Self>, String> {
    let Some(allowed) = allowed else { return Ok(None) };
    let base = root.unwrap_or("/");
    let mut rules = Vec::new();
    for pattern in allowed {
      let abs = if pattern.starts_with('/') {
        pattern.clone()
      } else {
        let joined = format!("{}/{pattern}", base.trim_end_matches('/'));
        crate::workspace::normalize(std::path::Path::new(&joined))
          .to_string_lossy()
          .into_owned()
      };
      let clean = if abs.len() > 1 {
        abs.trim_end_matches('/').to_string()
      } else {
        abs
      };
      let clean = if clean.is_empty() { "/".to_string() } else { clean };
      let rule = |p: &str| -> Result<Rule, String> {
        Ok(Rule {
          matcher: compile(p).map_err(|e| format!("invalid allowedPaths pattern {pattern:?}: {e}"))?,
          prefix: literal_prefix(p),
        })
      };
      rules.push(rule(&clean)?);
      // `dir/**` also allows `dir` itself (listing it, searching it).
      if let Some(dir) = clean.strip_suffix("/**") {
        rules.push(rule(if dir.is_empty() { "/" } else { dir })?);
      }
    }
    Ok(Some(Self { rules }))
  }

  /// Whether the resolved path, or a directory containing it, matches a pattern.
  pub fn allows(&self, abs: &str) -> bool {
    let mut p = abs;
    loop {
      if self.rules.iter().any(|r| r.matcher.is_match(p)) {
        return true;
      }
      let parent = dirname(p);
      if parent == p {
        return false;
      }
      p = parent;
    }
  }

  /// Whether a search rooted at `dir` can reach an allowed path at all.
  pub fn reaches(&self, dir: &str) -> bool {
    if self.allows(dir) {
      return true;
    }
    let d = if dir.ends_with('/') {
      dir.to_string()
    } else {
      format!("{dir}/")
    };
    self.rules.iter().any(|r| {
      let prefix = format!("{}/", r.prefix);
      r.prefix == "/" || prefix.starts_with(&d) || d.starts_with(&prefix)
    })
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn policy(p: &[&str]) -> PathPolicy {
    let v: Vec<String> = p.iter().map(|s| s.to_string()).collect();
    PathPolicy::new(Some(&v), Some("/ws")).unwrap().unwrap()
  }

  #[test]
  fn directories_globs_and_reach() {
    let p = policy(&["src", "out/**", "**/*.md"]);
    assert!(p.allows("/ws/src/a/b.ts"));
    assert!(p.allows("/ws/out"));
    assert!(p.allows("/ws/out/x/y"));
    assert!(p.allows("/ws/docs/readme.md"));
    assert!(!p.allows("/ws/docs/secret.txt"));
    assert!(p.reaches("/ws"));
    let q = policy(&["src/lib/**"]);
    assert!(q.reaches("/ws/src"));
    assert!(q.reaches("/ws/src/lib/deep"));
    assert!(!q.reaches("/ws/docs"));
    assert!(PathPolicy::new(Some(&["src/[a".to_string()]), Some("/ws")).is_err());
    assert!(PathPolicy::new(None, None).unwrap().is_none());
  }

  #[test]
  fn literal_prefixes() {
    assert_eq!(literal_prefix("/ws/src/lib/**/*.ts"), "/ws/src/lib");
    assert_eq!(literal_prefix("/ws/src"), "/ws/src");
    assert_eq!(literal_prefix("/**/*.md"), "/");
  }
}
