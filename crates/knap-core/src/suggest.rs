//! "Did you mean": the one nearest-name matcher knap uses when it refuses a name it does not
//! know, for model ids (`catalog::nearest`) and option keys, tool names and the like (`nearest`,
//! `did_you_mean`). Names are compared ignoring case, `-`, `_` and `.`, so `defaultTimeOut` is
//! `defaultTimeout`, `claude-haiku-4.5` is one step from `claude-haiku-4-5` and `bash` is `Bash`.

/// Levenshtein distance over chars (names are short; two rows of the table are enough).
pub fn edit_distance(a: &str, b: &str) -> usize {
  let b: Vec<char> = b.chars().collect();
  let mut prev: Vec<usize> = (0..=b.len()).collect();
  let mut cur = vec![0; b.len() + 1];
  for (i, ca) in a.chars().enumerate() {
    cur[0] = i + 1;
    for (j, &cb) in b.iter().enumerate() {
      let substitute = prev[j] + usize::from(ca != cb);
      cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
    }
    std::mem::swap(&mut prev, &mut cur);
  }
  prev[b.len()]
}

/// The form names are compared in: lowercase, without `-`, `_` and `.`.
fn fold(name: &str) -> String {
  name
    .chars()
    .filter(|c| !matches!(*c, '-' | '_' | '.'))
    .flat_map(char::to_lowercase)
    .collect()
}

/// How near `candidate` is to `reference` (lower is nearer), or `None` when it is no
/// suggestion. A candidate qualifies when, compared in folded form, its edit distance is at
/// most a third of the reference's length (at least 2), or when one contains the other and the
/// shorter has at least 3 chars (`workingDir` → `workingDirectory`); those rank after every
/// edit-distance match, the nearer in length first.
pub fn distance(reference: &str, candidate: &str) -> Option<usize> {
  let (mine, theirs) = (fold(reference), fold(candidate));
  let (a, b) = (mine.chars().count(), theirs.chars().count());
  let budget = (a / 3).max(2);
  let d = edit_distance(&mine, &theirs);
  if d <= budget {
    return Some(d);
  }
  let contains = a.min(b) >= 3 && (theirs.contains(&mine) || mine.contains(&theirs));
  contains.then(|| budget + 1 + a.abs_diff(b))
}

/// Up to `limit` of `candidates` nearest to `reference`, nearest first, then in the order given.
/// A candidate equal to the reference is included (distance 0): callers ask only after a miss.
pub fn nearest<'a, I>(reference: &str, candidates: I, limit: usize) -> Vec<&'a str>
where
  I: IntoIterator<Item = &'a str>,
{
  let mut scored: Vec<(usize, usize, &'a str)> = Vec::new();
  for (i, c) in candidates.into_iter().enumerate() {
    if scored.iter().any(|s| s.2 == c) {
      continue;
    }
    if let Some(d) = distance(reference, c) {
      scored.push((d, i, c));
    }
  }
  scored.sort_unstable();
  scored.into_iter().take(limit).map(|s| s.2).collect()
}

/// `did you mean "x"? ` for the nearest candidate, or `""`: the start of a hint line.
pub fn did_you_mean<'a, I>(reference: &str, candidates: I) -> String
where
  I: IntoIterator<Item = &'a str>,
{
  match nearest(reference, candidates, 1).first() {
    Some(c) => format!("did you mean {}? ", serde_json::Value::from(*c)),
    None => String::new(),
  }
}

/// The hint for a refused name: `did you mean "x"? the <what> are a, b, c`.
pub fn unknown_hint(name: &str, known: &[&str], what: &str) -> String {
  format!(
    "{}the {what} are {}",
    did_you_mean(name, known.iter().copied()),
    known.join(", ")
  )
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn edit_distances() {
    assert_eq!(edit_distance("", ""), 0);
    assert_eq!(edit_distance("abc", ""), 3);
    assert_eq!(edit_distance("kitten", "sitting"), 3);
    assert_eq!(edit_distance("héllo", "hello"), 1);
  }

  #[test]
  fn option_keys() {
    let sandbox = ["workingDirectory", "cwd", "env"];
    assert_eq!(nearest("workingDir", sandbox, 3), ["workingDirectory"]);
    assert_eq!(nearest("cdw", sandbox, 3), ["cwd"]);
    assert_eq!(nearest("working_directory", sandbox, 3), ["workingDirectory"]);
    let config = [
      "tools",
      "cache",
      "budget",
      "context",
      "defaultTimeout",
      "workingDirectory",
    ];
    assert_eq!(nearest("defaultTimeOut", config, 1), ["defaultTimeout"]);
    assert_eq!(nearest("tool", config, 1), ["tools"]);
    assert!(nearest("zzzzzzzz", config, 3).is_empty());
    // an edit-distance match ranks before a containment match
    assert_eq!(
      nearest("workingDir", ["workingDirectory", "workingDirs"], 2),
      ["workingDirs", "workingDirectory"]
    );
    // containment needs 3 chars on the shorter side
    assert!(nearest("ab", ["abcdefgh"], 1).is_empty());
    // ties keep the candidates' order; duplicates count once
    assert_eq!(nearest("bash", ["Bash", "bash", "Bash"], 3), ["Bash", "bash"]);
  }

  #[test]
  fn did_you_mean_text() {
    assert_eq!(
      did_you_mean("readfile", ["read_file", "grep", "bash"]),
      "did you mean \"read_file\"? "
    );
    assert_eq!(did_you_mean("qqqqqqqq", ["read_file", "grep", "bash"]), "");
    assert_eq!(
      unknown_hint("bsh", &["grep", "bash"], "tools"),
      "did you mean \"bash\"? the tools are grep, bash"
    );
    assert_eq!(
      unknown_hint("qqqqqqqq", &["grep", "bash"], "tools"),
      "the tools are grep, bash"
    );
  }
}
