//! Running rentcheck: the command line, first run, the demo, a private cluster, backups, the
//! database going away, and the test script.

mod backup_restore;
mod cli;
mod demo;
mod first_run;
mod private_cluster;
pub(crate) mod resilience;
mod test_script;
