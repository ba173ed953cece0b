//! The README's walk-through, pasted as a newcomer would: every step of its curl block runs
//! against a fresh server, and none answers a status the README does not promise.

use std::process::Command;

use crate::support::Server;

const README: &str = include_str!("../../README.md");

/// The shell block under "A walk-through with curl".
fn walk_through() -> &'static str {
    let section = README
        .split("## A walk-through with curl")
        .nth(1)
        .expect("the README has its walk-through");
    let block = section.split("```sh\n").nth(1).expect("a shell block");
    block.split("\n```").next().expect("the block ends")
}

async fn the_readme_walk_through_answers_as_documented(s: Server) {
    let script = walk_through()
        .lines()
        .filter(|line| !line.starts_with("export "))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("http://127.0.0.1:8080", &s.base);
    // Each curl also prints its status on a line of its own, which the steps that capture an
    // answer with grep never match.
    let prelude = format!(
        "export CRM={base}/v1\nexport KEY={key}\ncurl() {{ command curl -w '\\n@@status %{{http_code}}\\n' \"$@\"; }}\n",
        base = s.base,
        key = s.keys.test,
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("{prelude}{script}"))
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let statuses: Vec<u16> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("@@status "))
        .map(|s| s.trim().parse().unwrap())
        .collect();
    // Printed by the steps that do not capture their answer.
    assert!(statuses.len() >= 18, "{stdout}");
    // The README shows a 409 (a duplicate email), a 412 (a stale If-Match) and a 422 (a
    // misspelt field); anything else that is not a success is a step that does not work.
    for status in &statuses {
        assert!(
            (200..300).contains(status) || [409, 412, 422].contains(status),
            "a step answered {status}:\n{stdout}"
        );
    }
    for expected in [201, 409, 412, 422] {
        assert!(statuses.contains(&expected), "no {expected}:\n{stdout}");
    }
    assert!(!stdout.contains("no webhook with id"), "{stdout}");
}

crate::on_both_stores!(the_readme_walk_through_answers_as_documented);
