//! Runs a parsed command.

use crate::admin::{commands, doctor, import, token, ui};
use crate::cli::{Cli, Command};
use crate::error::CommandError;

pub async fn execute(cli: Cli) -> Result<(), CommandError> {
    match cli.command {
        Command::Add(args) => Ok(commands::add(args).await?),
        Command::Search(args) => Ok(commands::search(args).await?),
        Command::List(args) => Ok(commands::list(args).await?),
        Command::Forget(args) => Ok(commands::forget(args).await?),
        Command::History(args) => Ok(commands::history(args).await?),
        Command::Tag(args) => Ok(commands::tag(args).await?),
        Command::Prune(args) => Ok(commands::prune(args).await?),
        Command::Ui(args) => Ok(ui::ui(args).await?),
        Command::Stats(args) => Ok(commands::stats(args).await?),
        Command::Doctor(args) => Ok(doctor::doctor(args).await?),
        Command::Export(args) => Ok(commands::export_cmd(args).await?),
        Command::Import(args) => Ok(import::command::import_cmd(args).await?),
        Command::Migrate(args) => Ok(commands::migrate_cmd(args).await?),
        Command::Reembed(args) => Ok(commands::reembed_cmd(args).await?),
        Command::Token(args) => Ok(token::token(args).await?),
        Command::Model(args) => Ok(crate::model::run(args)?),
        Command::Completions(args) => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(args.shell, &mut command, "cortex", &mut std::io::stdout());
            Ok(())
        }
    }
}
