//! `cortex import --from chatgpt` and `--from claude`, end to end over the built binary and a
//! SQLite file, on hand-written exports (tests/fixtures/import/): the user's messages on
//! each conversation's current branch become memories, found by recall; a second import
//! adds nothing; `--since` and `--conversation` choose; a file cut short names the last
//! conversation read whole and writes nothing of the one it cut.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_support;
mod import_support;

use admin_support::*;
use import_support::*;

const TRIP: &str = "6632a1b0-0000-4000-8000-000000000001";
const DINNER: &str = "665b5a00-0000-4000-8000-000000000002";

#[test]
fn chatgpt_imports_the_current_branch_once_and_recall_finds_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("memory.db");
    let env = sqlite_env(&db);
    let file = fixture("chatgpt/conversations.json");

    let dry = json(&ok(
        &env,
        &[
            "import",
            "--from",
            "chatgpt",
            path(&file),
            "--dry-run",
            "--json",
        ],
    ));
    assert_eq!(dry["dry_run"], true);
    let counts = &dry["counts"];
    assert_eq!(count(counts, "conversation"), 3, "{counts}");
    assert_eq!(count(counts, "memory"), 5, "{counts}");
    // The edited-away question and the answer to it.
    assert_eq!(
        count(counts, "skipped message on another branch"),
        2,
        "{counts}"
    );
    assert_eq!(count(counts, "skipped assistant message"), 4, "{counts}");
    assert!(!db.exists(), "a dry run opens no store");

    let first = import(&env, "chatgpt", &file, &[]);
    assert_eq!(count(&first, "memory"), 5, "{first}");
    assert_eq!(count(&first, "embedded"), 5, "{first}");

    let all = contents(&env, "ada");
    assert_eq!(all.len(), 5, "{all:?}");
    assert!(all.iter().any(|c| c.contains("olives")), "{all:?}");
    // Only the current branch: the message the user edited away is not a memory.
    assert!(!all.iter().any(|c| c.contains("zucchini")), "{all:?}");
    assert!(
        !recall(&env, "ada", "zucchini")
            .iter()
            .any(|m| m["content"].as_str().unwrap().contains("zucchini"))
    );
    // Nor is anything the assistant said.
    assert!(
        !all.iter().any(|c| c.contains("Congratulations")),
        "{all:?}"
    );
    // A picture beside the text leaves the text.
    assert!(
        all.iter()
            .any(|c| c == "Here is the hotel I booked in Alfama, near the cathedral.")
    );

    let hit = &recall(&env, "ada", "flying to Lisbon for a wedding")[0];
    assert!(
        hit["content"]
            .as_str()
            .unwrap()
            .starts_with("I'm flying to Lisbon on May 3rd"),
        "{hit}"
    );
    assert_eq!(
        hit["created_at"], "2024-05-01T08:01:00.250Z",
        "the message's own time"
    );
    assert_eq!(
        tags(hit),
        [
            "chatgpt",
            &format!("conversation:{TRIP}"),
            "title:trip planning"
        ]
    );
    assert!(best(&env, "ada", "my new job as an engineer").contains("Acme Robotics"));

    let second = import(&env, "chatgpt", &file, &[]);
    assert_eq!(count(&second, "memory"), 0, "{second}");
    assert_eq!(count(&second, "memory already present"), 5, "{second}");
    assert_eq!(count(&second, "embedded"), 0, "{second}");
    assert_eq!(contents(&env, "ada").len(), 5);

    // --as-user files the same conversations under another user.
    let other = import(&env, "chatgpt", &file, &["--as-user", "bo"]);
    assert_eq!(count(&other, "memory"), 5, "{other}");
    assert_eq!(contents(&env, "bo").len(), 5);
}

#[test]
fn since_and_conversation_choose_what_a_chat_import_takes() {
    let dir = tempfile::tempdir().unwrap();
    let env = sqlite_env(&dir.path().join("memory.db"));
    let file = fixture("chatgpt/conversations.json");
    let dry = |extra: &[&str]| import(&env, "chatgpt", &file, &[&["--dry-run"], extra].concat());
    let one = dry(&["--conversation", DINNER]);
    assert_eq!(count(&one, "memory"), 2, "{one}");
    assert_eq!(count(&one, "conversation not selected"), 2, "{one}");
    let two = dry(&["--conversation", DINNER, "--conversation", TRIP]);
    assert_eq!(count(&two, "memory"), 4, "{two}");
    // By each message's own time: only the July conversation's.
    let since = dry(&["--since", "2024-06-15"]);
    assert_eq!(count(&since, "memory"), 1, "{since}");
    assert_eq!(count(&since, "skipped before --since"), 4, "{since}");

    let counts = import(&env, "chatgpt", &file, &["--conversation", DINNER]);
    assert_eq!(count(&counts, "memory"), 2, "{counts}");
    let all = contents(&env, "ada");
    assert!(
        all.iter()
            .all(|c| c.contains("vegetarian") || c.contains("olives")),
        "{all:?}"
    );

    let out = command(
        &env,
        &[],
        &[
            "import",
            "--from",
            "chatgpt",
            path(&file),
            "--dry-run",
            "--conversation",
            "nope",
        ],
    )
    .output()
    .unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no conversation of the file has the id nope")
    );

    let err = import_refused(&env, "mem0", &file, &["--conversation", DINNER]);
    assert!(
        err.contains("--conversation chooses conversations of a chat export"),
        "{err}"
    );
    let err = refused(&env, &["import", path(&file), "--since", "2024-01-01"]);
    assert!(err.contains("a cortex export is imported whole"), "{err}");
    let err = import_refused(&env, "chatgpt", &file, &["--since", "last week"]);
    assert!(err.contains("since"), "{err}");
}

#[test]
fn a_chatgpt_export_cut_short_names_the_last_conversation_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    // Cut inside the third conversation's first message.
    let (relative, marker) = ("chatgpt/conversations.json", "I started a new job");
    let cut_file = cut_fixture(dir.path(), relative, marker, 9, "conversations.json");
    let cut = std::fs::read(&cut_file).unwrap();
    let db = dir.path().join("memory.db");
    let env = sqlite_env(&db);
    let last = format!("conversation 2 'Dinner ideas' (id {DINNER}) was the last read whole");
    for extra in [&["--dry-run"][..], &[]] {
        let err = import_refused(&env, "chatgpt", &cut_file, extra);
        assert!(err.contains("the file is truncated"), "{err}");
        assert!(err.contains(&last), "{err}");
        assert!(err.contains("Nothing was imported"), "{err}");
    }
    // Found before the store is opened: nothing of the file is written.
    assert!(!db.exists());

    // Standard input is read once: the conversations read whole are written, nothing of
    // the one it cut.
    let out = run_in(&env, None, &["import", "--from", "chatgpt", "-"], &cut);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&last) && err.contains("Everything up to it is imported"),
        "{err}"
    );
    let all = contents(&env, "ada");
    assert_eq!(all.len(), 4, "{all:?}");
    assert!(!all.iter().any(|c| c.contains("Acme")), "{all:?}");

    // A conversation that is whole but not of the format is named, with the one before it.
    let whole = std::fs::read_to_string(fixture(relative)).unwrap();
    let bad = whole.replacen(
        "\"mapping\": {\n      \"bbb2-root\"",
        "\"mapping\": \"lost\", \"x\": {\n      \"bbb2-root\"",
        1,
    );
    let bad_file = dir.path().join("bad.json");
    std::fs::write(&bad_file, bad).unwrap();
    let err = import_refused(&env, "chatgpt", &bad_file, &["--dry-run"]);
    assert!(err.contains("conversation 2 cannot be imported"), "{err}");
    assert!(
        err.contains(&format!(
            "conversation 1 'Trip planning' (id {TRIP}) was the last read whole"
        )),
        "{err}"
    );
}

#[test]
fn claude_imports_the_human_messages_once_and_recall_finds_them() {
    let dir = tempfile::tempdir().unwrap();
    let env = sqlite_env(&dir.path().join("memory.db"));
    let file = fixture("claude/conversations.json");
    let first = import(&env, "claude", &file, &[]);
    assert_eq!(count(&first, "conversation"), 3, "{first}");
    assert_eq!(count(&first, "memory"), 4, "{first}");
    assert_eq!(count(&first, "skipped assistant message"), 3, "{first}");

    let all = contents(&env, "ada");
    assert_eq!(all.len(), 4, "{all:?}");
    assert!(
        !all.iter().any(|c| c.contains("Basil likes the sun")),
        "{all:?}"
    );
    let hit = &recall(&env, "ada", "who gave me a fig tree cutting")[0];
    assert_eq!(
        hit["content"],
        "My neighbour Rui gave me a cutting of his fig tree."
    );
    assert_eq!(hit["created_at"], "2024-04-02T09:20:00Z");
    // A message whose text is only in `text`, with no content blocks.
    assert!(best(&env, "ada", "favourite author").contains("Ursula K. Le Guin"));

    let second = import(&env, "claude", &file, &[]);
    assert_eq!(count(&second, "memory"), 0, "{second}");
    assert_eq!(count(&second, "memory already present"), 4, "{second}");
    assert_eq!(contents(&env, "ada").len(), 4);
}

#[test]
fn a_claude_export_cut_short_names_the_last_conversation_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (relative, marker) = ("claude/conversations.json", "half marathon");
    let cut_file = cut_fixture(dir.path(), relative, marker, 4, "conversations.json");
    let db = dir.path().join("memory.db");
    let env = sqlite_env(&db);
    let err = import_refused(&env, "claude", &cut_file, &[]);
    assert!(
        err.contains("conversation 1 'Garden plans' (id c1a0de00-0000-4000-8000-000000000001) was the last read whole"),
        "{err}"
    );
    assert!(err.contains("Nothing was imported"), "{err}");
    assert!(!db.exists());
}
