//! The command line.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// How `cortex export` writes (`cortex_app::transfer::ExportFormat`, as a flag value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// JSON Lines that `cortex import` reads back (docs/FORMAT.md).
    Jsonl,
    /// A document to read; `cortex import` refuses it.
    Markdown,
}

impl From<ExportFormat> for cortex_app::transfer::ExportFormat {
    fn from(format: ExportFormat) -> Self {
        match format {
            ExportFormat::Jsonl => Self::Jsonl,
            ExportFormat::Markdown => Self::Markdown,
        }
    }
}

/// Cortex: long-term memory for AI agents. Administers the store the memory server uses
/// (the same environment variables: CORTEX_DB_PATH or CORTEX_DATABASE_URL, CORTEX_USER_ID,
/// the embedder's; see docs/CONFIGURATION.md).
#[derive(Debug, Parser)]
#[command(name = "cortex", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The user a command reads and writes as.
#[derive(Debug, Clone, Args)]
pub struct UserArg {
    /// The user (default: CORTEX_USER_ID, else "default").
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Stores a memory (embeds it with the configured embedder).
    Add(AddArgs),
    /// Recalls the memories most relevant to a query, best first.
    Search(SearchArgs),
    /// Lists memories in the order they were stored, a page at a time.
    List(ListArgs),
    /// Deletes a memory by id or unique id prefix.
    Forget(IdArgs),
    /// Shows a memory's supersession chain with each version's validity interval.
    History(IdArgs),
    /// Changes a memory's kind or tags; recorded in its history (the memory gets a new id).
    Tag(TagArgs),
    /// Deletes the user's expired memories for good.
    Prune(PruneArgs),
    /// Opens the web page over the local store: serves it on 127.0.0.1 and prints (and
    /// opens) a link with a one-time token that logs the browser in.
    Ui(UiArgs),
    /// Counts memories by state, kind and tag, with the signature and the store's size.
    Stats(StatsArgs),
    /// Checks the configuration, the store, the model files and the signature.
    Doctor(DoctorArgs),
    /// Writes a user's (or every user's) memories and records as JSON Lines or markdown.
    Export(ExportArgs),
    /// Loads a `cortex export` file (ids and timestamps kept), or with --from another
    /// tool's export (chatgpt, claude, mcp-memory, mem0, basic-memory); safe to run again.
    Import(ImportArgs),
    /// Copies the configured store into another backend and verifies the copy per user.
    Migrate(MigrateArgs),
    /// Embeds every memory again with the configured embedder and switches the store to
    /// it atomically; resumable. Prints the calls and tokens it will cost first.
    Reembed(ReembedArgs),
    /// Makes, lists and revokes the API keys a hosted server accepts, each naming one user.
    Token(TokenArgs),
    /// Prints a shell completion script.
    Completions(CompletionsArgs),
    /// The local embedder's model: `cortex model fetch` downloads the default one.
    Model(crate::model::ModelArgs),
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The memory's text.
    pub content: String,
    /// fact, preference, event, decision, instruction or note.
    #[arg(long, default_value = "note")]
    pub kind: String,
    /// A tag; repeat for several.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// When it became true, if not now: YYYY-MM-DD or an RFC 3339 datetime.
    #[arg(long, value_name = "DATE")]
    pub created_at: Option<String>,
    /// The memory this one corrects (id or unique prefix): it stops being recalled in the
    /// same write, and `cortex history` shows both. Without --tag the new memory keeps
    /// the old one's tags.
    #[arg(long, value_name = "ID")]
    pub replaces: Option<String>,
    /// When it expires (YYYY-MM-DD or RFC 3339, in the future): from then on it is never
    /// recalled, and `cortex prune` deletes it.
    #[arg(long, value_name = "DATE")]
    pub expires_at: Option<String>,
    /// What the memory is about, as one JSON object, written to the entity graph and the
    /// timeline with it (no model call, no layer flag): {"subject": NAME, "entities":
    /// [{"name", "type"?, "aliases"?}], "relations": [{"from", "label", "to"}], "event":
    /// {"time", "place"?, "actor"?, "type"?}}, every part optional. The event time is
    /// RFC 3339, YYYY-MM-DD or YYYY-MM.
    #[arg(long, value_name = "JSON")]
    pub structure: Option<String>,
    #[command(flatten)]
    pub user: UserArg,
    /// Prints JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// What to look for.
    pub query: String,
    /// How many memories, 1 to 1000 (default: CORTEX_TOP_K or the tier's).
    #[arg(long)]
    pub limit: Option<usize>,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub user: UserArg,
    #[arg(long)]
    pub json: bool,
}

/// Which memories `search` and `list` consider; every flag given must hold.
#[derive(Debug, Args, Default)]
pub struct FilterArgs {
    /// Only this kind (fact, preference, event, decision, instruction, note); repeat for
    /// any of several.
    #[arg(long = "kind", value_name = "KIND")]
    pub kinds: Vec<String>,
    /// Only memories with this tag; repeat for any of several.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Only memories with this tag; repeat for all of several.
    #[arg(long = "tag-all", value_name = "TAG")]
    pub tags_all: Vec<String>,
    /// Only memories created at or after: YYYY-MM-DD (midnight UTC) or RFC 3339.
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Only memories created before (exclusive), in the same forms.
    #[arg(long, value_name = "DATE")]
    pub until: Option<String>,
}

impl FilterArgs {
    pub fn text(&self) -> cortex_app::FilterText<'_> {
        cortex_app::FilterText {
            kinds: &self.kinds,
            tags: &self.tags,
            tags_all: &self.tags_all,
            since: self.since.as_deref(),
            until: self.until.as_deref(),
        }
    }
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Memories per page, 1 to 1000.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// The cursor a previous page printed; omit for the first page.
    #[arg(long)]
    pub cursor: Option<String>,
    /// Includes superseded memories.
    #[arg(long)]
    pub superseded: bool,
    /// Includes expired memories not yet pruned.
    #[arg(long)]
    pub expired: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub user: UserArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Lists what would be deleted, and deletes nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub user: UserArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct UiArgs {
    /// The port on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Prints the link without opening a browser.
    #[arg(long)]
    pub no_open: bool,
    #[command(flatten)]
    pub user: UserArg,
}

#[derive(Debug, Args)]
pub struct TagArgs {
    /// The memory's id, or a prefix of at least 4 characters that matches one memory.
    pub id: String,
    /// A tag to add; repeat for several.
    #[arg(long = "add", value_name = "TAG")]
    pub add: Vec<String>,
    /// A tag to remove; repeat for several.
    #[arg(long = "remove", value_name = "TAG")]
    pub remove: Vec<String>,
    /// The new kind: fact, preference, event, decision, instruction or note.
    #[arg(long)]
    pub kind: Option<String>,
    #[command(flatten)]
    pub user: UserArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct IdArgs {
    /// The memory's id, or a prefix of at least 4 characters that matches one memory.
    pub id: String,
    #[command(flatten)]
    pub user: UserArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    #[command(flatten)]
    pub user: UserArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TokenArgs {
    #[command(subcommand)]
    pub command: TokenCommand,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Makes a key for a user and prints it once (the store keeps only its digest).
    Create(TokenCreateArgs),
    /// Lists keys: id, scope, user, dates and state; never a secret.
    List(TokenListArgs),
    /// Revokes a key: its next request is refused.
    Revoke(TokenRevokeArgs),
}

#[derive(Debug, Args)]
pub struct TokenCreateArgs {
    /// The user every request with this key is served as.
    #[arg(long, value_name = "USER")]
    pub user: String,
    /// `read`: recall, list and the keyed reads; `write`: also memorize and forget.
    #[arg(long, value_enum, default_value_t = ScopeArg::Write)]
    pub scope: ScopeArg,
    /// When the key stops working: a duration from now (90d, 12h, 2w) or an RFC 3339
    /// time. Default: never.
    #[arg(long, value_name = "WHEN")]
    pub expires: Option<String>,
    /// A note for `cortex token list` (whose laptop, which service).
    #[arg(long)]
    pub label: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScopeArg {
    Read,
    Write,
}

#[derive(Debug, Args)]
pub struct TokenListArgs {
    /// Only this user's keys.
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TokenRevokeArgs {
    /// The key's id (the 16 hex digits after `cx_`, as `cortex token list` shows them).
    pub id: String,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Also makes one real call to the configured embedder.
    #[arg(long)]
    pub online: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Where to write; `-` or none: standard output.
    #[arg(long, short, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Every user in the store, not only one.
    #[arg(long, conflicts_with = "user")]
    pub all_users: bool,
    /// Includes each memory's vector, so an import with the same embedder makes no
    /// embedding calls.
    #[arg(long)]
    pub with_vectors: bool,
    #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
    pub format: ExportFormat,
    #[command(flatten)]
    pub user: UserArg,
}

/// What `cortex import` reads (docs/FORMAT.md, "Importing from other tools").
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImportFormat {
    /// A `cortex export` file (JSON Lines).
    Cortex,
    /// ChatGPT's data export, conversations.json: your messages on each conversation's
    /// current branch.
    Chatgpt,
    /// Claude's data export, conversations.json: your messages on each conversation's
    /// current branch.
    Claude,
    /// The MCP reference memory server's memory.jsonl: entities, observations and
    /// relations, with the graph.
    McpMemory,
    /// mem0's memories (a JSON array, `{"results": [...]}` or JSON Lines), per user.
    Mem0,
    /// A folder of basic-memory notes: observations, relations and text, with the graph.
    BasicMemory,
}

impl ImportFormat {
    /// The name `--from` takes, also part of every imported memory's id.
    pub fn name(self) -> &'static str {
        match self {
            ImportFormat::Cortex => "cortex",
            ImportFormat::Chatgpt => "chatgpt",
            ImportFormat::Claude => "claude",
            ImportFormat::McpMemory => "mcp-memory",
            ImportFormat::Mem0 => "mem0",
            ImportFormat::BasicMemory => "basic-memory",
        }
    }
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The file to read (`-` for stdin): a `cortex export` file, or what --from names (for
    /// basic-memory, the folder of notes).
    pub file: PathBuf,
    /// What the file is. Every format is safe to import again: nothing is doubled.
    #[arg(long = "from", value_enum, value_name = "FORMAT", default_value_t = ImportFormat::Cortex)]
    pub from: ImportFormat,
    /// Reads and checks every record and prints the counts; writes nothing and calls no
    /// model.
    #[arg(long)]
    pub dry_run: bool,
    /// Imports every record as this user instead of the file's (or, for a file without
    /// users, instead of CORTEX_USER_ID).
    #[arg(long, value_name = "USER")]
    pub as_user: Option<String>,
    /// Only memories dated at or after DATE (YYYY-MM-DD or RFC 3339): messages by their
    /// time, other records by theirs. Not for a cortex export.
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Only this conversation of a chat export (its id: ChatGPT's `id`, Claude's `uuid`);
    /// repeat for several.
    #[arg(long = "conversation", value_name = "ID")]
    pub conversations: Vec<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The destination: a postgres:// URL, or a SQLite file path.
    #[arg(long, value_name = "URL|PATH")]
    pub to: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ReembedArgs {
    /// Starts the re-embedding; without it only the estimate is printed.
    #[arg(long)]
    pub yes: bool,
    /// Memories per embedding call (and per staging transaction), for providers with a
    /// smaller batch limit.
    #[arg(long, default_value_t = crate::admin::reembed::BATCH, value_parser = clap::value_parser!(u64).range(1..=2048))]
    pub batch: u64,
    #[arg(long)]
    pub json: bool,
}
