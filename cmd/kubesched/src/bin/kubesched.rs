//! The `kubesched` binary: kubesched's command line with the in-tree plugins only.

fn main() -> std::process::ExitCode {
    kubesched::SchedulerCommand::new().run()
}
