//! `nodenumber-scheduler`: kubesched with the NodeNumber plugin added, every subcommand and
//! flag included.

fn main() -> std::process::ExitCode {
    kubesched::SchedulerCommand::new()
        .with_plugin(nodenumber::NAME, nodenumber::new)
        .run()
}
