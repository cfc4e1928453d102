//! `cortex export` and `cortex import` agreeing on what a file is, end to end over the built
//! binary and SQLite files: a markdown export is refused by import with a message that says
//! so, `export -o -` writes standard output (as `import -` reads standard input), and a file
//! cut short names its last good line and, read from a file, writes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_support;

use admin_support::*;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A header and `n` memory lines of user `ada`, without vectors; the memories' ids.
fn memories_file(n: usize) -> (String, Vec<uuid::Uuid>) {
    let mut file = String::from(
        r#"{"type":"header","format":"cortex-export","version":1,"exported_at":"2024-01-01T00:00:00Z","vectors":false,"users":["ada"]}"#,
    );
    file.push('\n');
    let mut ids = Vec::new();
    for i in 0..n {
        let id = uuid::Uuid::new_v4();
        file.push_str(&format!(
            r#"{{"type":"memory","id":"{id}","user_id":"ada","content":"Memory {i}: café — crème brûlée","kind":"fact","tags":["t"],"created_at":"2024-01-01T00:00:00Z","superseded":false}}"#
        ));
        file.push('\n');
        ids.push(id);
    }
    (file, ids)
}

/// `file` cut inside its last line (line `lines`), `keep` bytes into it.
fn cut_in_last_line(file: &str, keep: usize) -> Vec<u8> {
    let body = file.strip_suffix('\n').unwrap();
    let start = body.rfind('\n').unwrap() + 1;
    body.as_bytes()[..start + keep].to_vec()
}

#[tokio::test]
async fn a_markdown_export_is_refused_by_import_with_a_message_saying_it_is_for_reading() {
    let dir = tempfile::tempdir().unwrap();
    let a = sqlite_env(&dir.path().join("a.db"));
    seed(&a).await;
    let md = dir.path().join("ada.md");
    ok(&a, &["export", "--format", "markdown", "-o", path(&md)]);
    assert!(
        std::fs::read_to_string(&md)
            .unwrap()
            .starts_with("# Cortex memories\n"),
        "the markdown export's first line is what import knows it by"
    );

    let b_db = dir.path().join("b.db");
    let b = sqlite_env(&b_db);
    for args in [
        vec!["import", path(&md)],
        vec!["import", path(&md), "--dry-run"],
    ] {
        let err = refused(&b, &args);
        assert!(
            err.contains("is a markdown export")
                && err.contains("for reading, not for importing")
                && err.contains("--format jsonl"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("not a cortex-export header"), "{err}");
    }
    // The same from standard input.
    let out = run_in(
        &b,
        Some(dir.path()),
        &["import", "-"],
        &std::fs::read(&md).unwrap(),
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("is a markdown export"),
        "{}",
        text(&out.stderr)
    );
    assert!(!b_db.exists(), "a refused file opens no store");

    // Anything else that is not an export keeps its own message.
    let other = dir.path().join("other.txt");
    std::fs::write(&other, "# Notes\nhello\n").unwrap();
    let err = refused(&b, &["import", path(&other)]);
    assert!(
        err.contains("line 1 is not a cortex-export header"),
        "{err}"
    );
    std::fs::write(&other, "").unwrap();
    let err = refused(&b, &["import", path(&other)]);
    assert!(err.contains("the file is empty"), "{err}");
}

#[tokio::test]
async fn export_to_dash_writes_standard_output_exactly_as_a_file_and_creates_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let a = sqlite_env(&dir.path().join("a.db"));
    seed(&a).await;

    for format in ["jsonl", "markdown"] {
        let file = dir.path().join(format!("all.{format}"));
        let to_file = run_in(
            &a,
            Some(&work),
            &[
                "export",
                "--all-users",
                "--with-vectors",
                "--format",
                format,
                "-o",
                path(&file),
            ],
            b"",
        );
        assert!(to_file.status.success(), "{}", text(&to_file.stderr));
        assert!(to_file.stdout.is_empty(), "{}", text(&to_file.stdout));
        let to_stdout = run_in(
            &a,
            Some(&work),
            &[
                "export",
                "--all-users",
                "--with-vectors",
                "--format",
                format,
                "-o",
                "-",
            ],
            b"",
        );
        assert!(to_stdout.status.success(), "{}", text(&to_stdout.stderr));
        assert!(
            std::fs::read_dir(&work).unwrap().next().is_none(),
            "`-o -` creates no file (named `-` or any other)"
        );
        // The summary is on stderr, out of the data.
        let stderr = text(&to_stdout.stderr);
        assert!(stderr.contains("exported "), "{stderr}");
        let stdout = text(&to_stdout.stdout);
        assert!(!stdout.contains("exported "), "{stdout}");

        // The same bytes but the export time.
        let same = |t: &str| -> Vec<String> {
            t.lines()
                .map(|l| match l.starts_with(r#"{"type":"header""#) {
                    true => {
                        let mut h = json(l);
                        h["exported_at"] = serde_json::Value::Null;
                        h.to_string()
                    }
                    false if l.starts_with("Exported ") => "Exported".to_owned(),
                    false => l.to_owned(),
                })
                .collect()
        };
        let written = std::fs::read_to_string(&file).unwrap();
        assert!(stdout.ends_with('\n') && written.ends_with('\n'));
        assert_eq!(same(&stdout), same(&written), "{format}");
        assert!(same(&stdout).len() > 10, "{stdout}");
    }

    // `export -o -` into `import -`: the records arrive whole.
    let piped = run_in(&a, Some(&work), &["export", "--all-users", "-o", "-"], b"");
    let b = sqlite_env(&dir.path().join("b.db"));
    let imported = run_in(&b, Some(&work), &["import", "-", "--json"], &piped.stdout);
    assert!(imported.status.success(), "{}", text(&imported.stderr));
    assert_eq!(export_lines(&b, false), export_lines(&a, false));
}

#[tokio::test]
async fn a_file_cut_short_names_its_last_good_line_and_from_a_file_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // 300 memories: more than one batch of 256.
    let (file, ids) = memories_file(300);
    let last_line = 301;
    // Cut in the middle of the last memory's content, inside the `é` of `café`.
    let line = file.lines().nth(last_line - 1).unwrap();
    let cut_at = line.find("café").unwrap() + "caf".len() + 1;
    assert!(!line.is_char_boundary(cut_at));
    let cuts = [
        ("inside a record", cut_in_last_line(&file, 40)),
        ("inside a character", cut_in_last_line(&file, cut_at)),
    ];
    let want = format!(
        "the file is truncated: line {last_line} ends in the middle of a record; the last good \
         line is {} (the last memory read whole is {}, on line {})",
        last_line - 1,
        ids[298],
        last_line - 1
    );

    for (n, (how, cut)) in cuts.iter().enumerate() {
        let cut_file = dir.path().join("cut.jsonl");
        std::fs::write(&cut_file, cut).unwrap();
        let db = dir.path().join(format!("from-file-{n}.db"));
        let env = sqlite_env(&db);
        for args in [
            vec!["import", path(&cut_file), "--dry-run"],
            vec!["import", path(&cut_file)],
        ] {
            let err = refused(&env, &args);
            assert!(err.contains(&want), "{how}, {args:?}: {err}");
            assert!(err.contains("Nothing was imported"), "{how}: {err}");
        }
        // Found before the store is opened: nothing written, no store made.
        assert_eq!(count_rows(&db, "memories"), None, "{how}");
        assert!(!db.exists(), "{how}");

        // From standard input the cut is found where it is: the batches before it are in
        // (lines 2-257, each batch validated and written whole), nothing after them.
        let db = dir.path().join(format!("from-stdin-{n}.db"));
        let env = sqlite_env(&db);
        let out = run_in(&env, Some(dir.path()), &["import", "-"], cut);
        assert!(!out.status.success(), "{how}");
        let err = text(&out.stderr);
        assert!(err.contains(&want), "{how}: {err}");
        assert!(
            err.contains("Lines 2-257 are imported, nothing after them"),
            "{how}: {err}"
        );
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
        assert_eq!(count_rows(&db, "memories"), Some(256), "{how}");

        // Running it again with the whole file finishes it: nothing doubled.
        let done = json(&text(
            &run_in(
                &env,
                Some(dir.path()),
                &["import", "-", "--json"],
                file.as_bytes(),
            )
            .stdout,
        ));
        assert_eq!(done["counts"]["memory"], 44, "{done}");
        assert_eq!(done["counts"]["memory already present"], 256, "{done}");
        assert_eq!(count_rows(&db, "memories"), Some(300), "{how}");
    }

    // A cut in the header: no line is whole.
    let cut_file = dir.path().join("header.jsonl");
    std::fs::write(&cut_file, &file.as_bytes()[..30]).unwrap();
    let env = sqlite_env(&dir.path().join("h.db"));
    let err = refused(&env, &["import", path(&cut_file)]);
    assert!(
        err.contains(
            "the file is truncated: line 1 ends in the middle of a record; no line before it \
             is complete"
        ),
        "{err}"
    );

    // A last line that is whole but lost its newline is not a cut: it imports.
    let whole = dir.path().join("no-newline.jsonl");
    std::fs::write(&whole, file.strip_suffix('\n').unwrap()).unwrap();
    let db = dir.path().join("whole.db");
    let env = sqlite_env(&db);
    ok(&env, &["import", path(&whole)]);
    assert_eq!(count_rows(&db, "memories"), Some(300));
}

#[tokio::test]
async fn a_real_export_cut_short_names_the_last_memory_before_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let a = sqlite_env(&dir.path().join("a.db"));
    seed(&a).await;
    let file = dir.path().join("all.jsonl");
    ok(&a, &["export", "--all-users", "-o", path(&file)]);
    let full = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    // The last memory before the last line, which is cut below.
    let (at, last_memory) = lines[..lines.len() - 1]
        .iter()
        .enumerate()
        .rfind(|(_, l)| l.starts_with(r#"{"type":"memory""#))
        .map(|(i, l)| (i + 1, json(l)["id"].as_str().unwrap().to_owned()))
        .unwrap();
    // Cut halfway through the last line.
    let cut = cut_in_last_line(&full, lines.last().unwrap().len() / 2);
    let cut_file = dir.path().join("cut.jsonl");
    std::fs::write(&cut_file, cut).unwrap();
    let db = dir.path().join("b.db");
    let err = refused(&sqlite_env(&db), &["import", path(&cut_file)]);
    assert!(
        err.contains(&format!(
            "line {} ends in the middle of a record; the last good line is {} (the last \
             memory read whole is {last_memory}, on line {at})",
            lines.len(),
            lines.len() - 1
        )),
        "{err}"
    );
    assert!(!db.exists());
}
