//! `dcgmi diag` outputs shaped as dcgmi prints them. Each input says where its shape comes from:
//! NVIDIA/DCGM `dcgmi/Diag.cpp` at a release tag (the row layout: a 25-character name column and a
//! 45-character result column, `DisplayVerboseInfo` wrapping a message every 45 characters), and the
//! real tables in `tests/fixtures/dcgm-diag/` (see its PROVENANCE.md).

use crate::evidence::parsers::{parse, EvidenceKind, MetricValue, Parsed};

fn run(input: &str) -> Parsed {
    // Every table row is as wide as dcgmi's: `| ` + 25 + ` | ` + 46 + ` |`.
    for l in input.lines().filter(|l| l.starts_with('|') || l.starts_with('+')) {
        assert_eq!(l.chars().count(), 78, "not a dcgmi table row: {l:?}");
    }
    parse(EvidenceKind::DcgmDiag, input.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
}

fn boolean(p: &Parsed, key: &str) -> bool {
    match p.metrics.get(key) {
        Some(MetricValue::Bool(b)) => *b,
        other => panic!("{key}: {other:?}"),
    }
}

fn count(p: &Parsed, key: &str) -> f64 {
    match p.metrics.get(key) {
        Some(MetricValue::Number(n)) => *n,
        other => panic!("{key}: {other:?}"),
    }
}

fn list(p: &Parsed, key: &str) -> Vec<String> {
    match p.metrics.get(key) {
        Some(MetricValue::List(l)) => l.clone(),
        other => panic!("{key}: {other:?}"),
    }
}

fn noted(p: &Parsed, part: &str) -> bool {
    p.warnings.iter().any(|w| w.contains(part))
}

/// An entity row the parser cannot read is its own note, not a DCGM warning: a verdict word no
/// DCGM release prints (`Abnormal` stands for one a later release might add); the layout is that
/// of `dcgm-4.4.1-b200-x8-r2-pcie-fail.txt`. (`Not Run`, which 4.5 and 4.6 print, is a skip: see
/// `dcgm_text45_a_gpu_that_did_not_run_is_a_skip`.)
#[test]
fn dcgm_text_unreadable_rows_are_parse_notes_not_dcgm_warnings() {
    let p = run("\
Successfully ran diagnostic for group.
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Metadata  ----------+------------------------------------------------|
| DCGM Version              | 4.6.0                                          |
| Driver Version Detected   | 580.95.05                                      |
| GPU Device IDs Detected   | 2330, 2330                                     |
|-----  Deployment  --------+------------------------------------------------|
| software                  | Pass                                           |
|                           | GPU0: Pass                                     |
|                           | GPU1: Abnormal                                 |
+---------------------------+------------------------------------------------+
");
    assert_eq!(count(&p, "dcgm.diag.warnings"), 0.0);
    assert!(noted(&p, "unreadable entity result GPU1: Abnormal"), "{:?}", p.warnings);
}

/// A run dcgmi could not start: `HelperDisplayFailureMessage` writes only the version and
/// `runtime_error` under `DCGM Diagnostic` (NVIDIA/DCGM v4.4.1 ca755f1487915935447be84e70c45d2d7b050f3c,
/// dcgmi/Diag.cpp; the message is one of its callers'), as jsoncpp's `toStyledString` indents it. The
/// run fails; the message is a parse note, not a test's warning.
#[test]
fn dcgm_json_runtime_error_fails_without_counting_a_dcgm_warning() {
    let p = run(r#"{
   "DCGM Diagnostic" : {
      "runtime_error" : "Error: Diagnostic could not be run while DCGM is paused.",
      "version" : "4.4.1"
   }
}
"#);
    assert!(!boolean(&p, "dcgm.diag.passed"));
    assert_eq!(count(&p, "dcgm.diag.warnings"), 0.0);
    assert!(noted(&p, "could not be run while DCGM is paused"), "{:?}", p.warnings);
}

/// A test with neither results nor a summary (4.x writes only its name when every result is
/// NOT_RUN: `HelperJsonAddResult` records nothing for NOT_RUN, v4.4.1 dcgmi/Diag.cpp) is a parse
/// note, not a DCGM warning.
#[test]
fn dcgm_json_test_without_a_result_was_not_run() {
    // The 4.4.1 run below, its pcie test written as dcgmi writes a test that was not run: a name
    // and nothing else. A skip, as the text table's `Not Run` is (it was left out, and the run
    // passed).
    let mut v: serde_json::Value = serde_json::from_str(DCGM4_ENTITY_WARNINGS_JSON).unwrap();
    v["DCGM Diagnostic"]["test_categories"][2]["tests"][0] = serde_json::json!({ "name": "pcie" });
    let p = run(&serde_json::to_string_pretty(&v).unwrap());
    assert!(noted(&p, "test \"pcie\" has no result: not run"), "{:?}", p.warnings);
    assert_eq!(list(&p, "dcgm.diag.skipped_tests"), vec!["pcie"]);
    assert_eq!(p.metrics.get("dcgm.diag.passed"), Some(&MetricValue::Bool(false)));
    // The memory test's two distinct warnings, as in the whole run: the note is not a third.
    assert_eq!(count(&p, "dcgm.diag.warnings"), 2.0);
}

/// DCGM 2.x/3.x print a test whose GPUs disagree as one row per verdict, the first under the
/// test's name (NVIDIA/DCGM v3.3.8 903d745504f50153be8293f8566346f9de3b3c93, dcgmi/Diag.cpp
/// `HelperDisplayGpuResults`: `Pass - GPUs: …`, then `Fail - GPU: …`, `Warn - GPU: …`, `Skip - GPU: …`
/// with an empty name; testing/python3/tests/test_dcgm_diag.py looks for `Fail - GPU: %s`). The
/// other rows are those of `dcgm-3.3.8-h100-x8-r3-fail-early-cuinit-fail-skip.txt`.
const DCGM3_GPUS_DISAGREE: &str = "\
Successfully ran diagnostic for group.
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Metadata  ----------+------------------------------------------------|
| DCGM Version              | 3.3.8                                          |
| Driver Version Detected   | 560.35.03                                      |
| GPU Device IDs Detected   | 2330,2330,2330,2330,2330,2330,2330,2330        |
|-----  Deployment  --------+------------------------------------------------|
| Denylist                  | Pass                                           |
| NVML Library              | Pass                                           |
| CUDA Main Library         | Pass                                           |
| Permissions and OS Blocks | Pass                                           |
| Persistence Mode          | Pass                                           |
| Environment Variables     | Pass                                           |
| Page Retirement/Row Remap | Pass                                           |
| Graphics Processes        | Pass                                           |
| Inforom                   | Pass                                           |
+-----  Integration  -------+------------------------------------------------+
| PCIe                      | Pass - All                                     |
+-----  Hardware  ----------+------------------------------------------------+
| GPU Memory                | Pass - All                                     |
+-----  Stress  ------------+------------------------------------------------+
| Targeted Stress           | Pass - GPUs: 0, 1, 2, 3, 4, 5, 7               |
|                           | Warn - GPU: 6                                  |
| Targeted Power            | Pass - GPUs: 0, 1, 2, 4, 5, 6, 7               |
|                           | Fail - GPU: 3                                  |
| Warning                   | GPU 3 Max power of 512.3 did not reach desire  |
|                           | d power minimum target_power_min_ratio of 525  |
|                           | .0 for GPU 3 Verify that the clock speeds and  |
|                           |  GPU utilization are high.                     |
| Memory Bandwidth          | Pass - GPUs: 0, 1, 2, 3, 4, 5, 6               |
|                           | Skip - GPU: 7                                  |
+---------------------------+------------------------------------------------+
";

#[test]
fn dcgm_text3_a_gpu_row_under_a_pass_row_gives_the_test_its_verdict() {
    let p = run(DCGM3_GPUS_DISAGREE);
    assert!(!boolean(&p, "dcgm.diag.passed"));
    assert_eq!(list(&p, "dcgm.diag.failed_tests"), vec!["Targeted Power"]);
    assert_eq!(list(&p, "dcgm.diag.warned_tests"), vec!["Targeted Stress"]);
    // GPU 7 did not run it: not every test that should run ran.
    assert_eq!(list(&p, "dcgm.diag.skipped_tests"), vec!["Memory Bandwidth"]);
    assert_eq!(count(&p, "dcgm.diag.warnings"), 1.0);
    assert!(
        noted(
            &p,
            "Targeted Power: GPU 3 Max power of 512.3 did not reach desired power minimum"
        ),
        "{:?}",
        p.warnings
    );
    assert!(!noted(&p, "unreadable"), "{:?}", p.warnings);
}

/// On a box of 16 GPUs, a row listing many of them is longer than dcgmi's 46-character cell, which
/// it cuts to 43 characters and `...` (`CommandOutputController::ReplaceTag`, dcgmi of 2.4.7 to
/// 3.3.9): the cut row is still the failing verdict of the test above it.
#[test]
fn dcgm_text3_a_verdict_row_dcgmi_cut_short_still_counts() {
    let input = DCGM3_GPUS_DISAGREE.replace(
        "| PCIe                      | Pass - All                                     |\n",
        "| PCIe                      | Pass - GPUs: 0, 1, 2, 3, 4, 5                  |\n\
         |                           | Fail - GPUs: 6, 7, 8, 9, 10, 11, 12, 13, 14... |\n",
    );
    assert!(input.contains("14... |"), "{input}");
    let p = run(&input);
    assert!(!boolean(&p, "dcgm.diag.passed"));
    assert_eq!(list(&p, "dcgm.diag.failed_tests"), vec!["PCIe", "Targeted Power"]);
    assert!(noted(&p, "cut this row's list of GPUs short"), "{:?}", p.warnings);
    assert!(!noted(&p, "unreadable"), "{:?}", p.warnings);
}

/// dcgmi refuses a GPU in MIG mode, or an empty group, in a line and no table (NVIDIA/DCGM#94,
/// #70): not every test that should run ran, so the run did not pass, as the same refusal in `-j`
/// (`runtime_error`) reads; DCGM's words say why.
#[test]
fn dcgm_text_a_refusal_without_a_table_is_a_run_that_did_not_pass() {
    let refused = "GPU 0's MIG configuration is incompatible with the diagnostic because it prevents \
                   access to the entire GPU.\n\
                   Error: Unable to complete diagnostic for group 1. Return: (-35) The specified group is empty.\n";
    let p = parse(EvidenceKind::DcgmDiag, refused.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    assert!(!boolean(&p, "dcgm.diag.passed"));
    assert_eq!(list(&p, "dcgm.diag.failed_tests"), vec!["runtime"]);
    assert!(
        noted(&p, "line 1: DCGM did not complete the diagnostic: GPU 0's MIG"),
        "{:?}",
        p.warnings
    );
    assert!(
        noted(&p, "line 2: DCGM did not complete the diagnostic: Error: Unable"),
        "{:?}",
        p.warnings
    );
    // Text that is neither a table nor DCGM's refusal is still no diagnostic.
    let other = parse(EvidenceKind::DcgmDiag, b"Error: disk full\n").unwrap_err();
    assert!(other.to_string().contains("no dcgmi diag result table"), "{other}");
}

/// `--iterations 3` whose second round stopped: its first table passed, and dcgmi then says it
/// aborted (dcgmi/Diag.cpp `RunStartDiag`): not a pass.
#[test]
fn dcgm_text_iterations_that_stopped_after_a_passing_round_are_not_a_pass() {
    // Every test passed: the skip row of `only_a_skip` goes too.
    let passing = only_a_skip().replace(
        "|                           | Skip - GPU: 7                                  |\n",
        "",
    );
    let once = format!("Running iteration 1 of 3...\n{passing}\n");
    assert!(boolean(&run(&once), "dcgm.diag.passed"), "{once}");
    let stopped = format!(
        "{once}Running iteration 2 of 3...\n\
         Error: Unable to complete diagnostic for group 0. Return: (-6) Host engine connection invalid/disconnected.\n\
         Aborting the iterative runs of the diagnostic due to failure: Host engine connection invalid/disconnected.\n"
    );
    let p = run(&stopped);
    assert!(!boolean(&p, "dcgm.diag.passed"));
    assert_eq!(list(&p, "dcgm.diag.failed_tests"), vec!["runtime"]);
}

/// [`DCGM3_GPUS_DISAGREE`] with every test passed but Memory Bandwidth, which GPU 7 skipped.
fn only_a_skip() -> String {
    let input = DCGM3_GPUS_DISAGREE
        .replace(
            "| Targeted Stress           | Pass - GPUs: 0, 1, 2, 3, 4, 5, 7               |\n\
             |                           | Warn - GPU: 6                                  |\n",
            "| Targeted Stress           | Pass - All                                     |\n",
        )
        .replace(
            "| Targeted Power            | Pass - GPUs: 0, 1, 2, 4, 5, 6, 7               |\n\
             |                           | Fail - GPU: 3                                  |\n",
            "| Targeted Power            | Pass - All                                     |\n",
        );
    input.replace(
        "| Warning                   | GPU 3 Max power of 512.3 did not reach desire  |\n\
         |                           | d power minimum target_power_min_ratio of 525  |\n\
         |                           | .0 for GPU 3 Verify that the clock speeds and  |\n\
         |                           |  GPU utilization are high.                     |\n",
        "",
    )
}

/// The same table with only a Skip under the Pass: a Skip is not a pass.
#[test]
fn dcgm_text3_a_skip_row_under_a_pass_row_is_not_a_pass() {
    let input = only_a_skip();
    assert!(!input.contains("Fail") && !input.contains("Warn"), "{input}");
    let p = run(&input);
    assert!(!boolean(&p, "dcgm.diag.passed"));
    assert_eq!(list(&p, "dcgm.diag.skipped_tests"), vec!["Memory Bandwidth"]);
    assert_eq!(list(&p, "dcgm.diag.failed_tests"), Vec::<String>::new());
    assert_eq!(count(&p, "dcgm.diag.warnings"), 0.0);
    assert_eq!(list(&p, "dcgm.diag.tests_run").len(), 13);
}

/// DCGM 4.x prints each test's row with its overall result and the warnings tied to no entity
/// (`Warning`), then one row per entity (`GPU0: Fail`), each followed by that entity's warnings
/// labelled `Warning: GPU0` and, with `-v`, its info labelled `Info: GPU0` (NVIDIA/DCGM v4.4.1
/// ca755f1487915935447be84e70c45d2d7b050f3c, dcgmi/Diag.cpp `HelperDisplayGlobalResult` and
/// `HelperDisplayEntityResults`; the same code from v4.0.0 to v4.6.0). The frame, metadata and the
/// bare Warning's message are those of `dcgm-4.2.3-l40s-x4-pcie-fail-internal-error-warnings.txt`;
/// the cuInit message is the one of `dcgm-3.3.8-h100-x8-r3-fail-early-cuinit-fail-skip.txt`, which
/// 4.x prints under `Warning: GPUn` instead of prefixing it with `GPU n`. A run with `-v`, as the
/// Info row shows; GPU 1 skipped pcie.
const DCGM4_ENTITY_WARNINGS: &str = "\
Successfully ran diagnostic for group.
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Metadata  ----------+------------------------------------------------|
| DCGM Version              | 4.4.1                                          |
| Driver Version Detected   | 570.172.08                                     |
| GPU Device IDs Detected   | 26b9, 26b9                                     |
|-----  Deployment  --------+------------------------------------------------|
| software                  | Pass                                           |
|                           | GPU0: Pass                                     |
|                           | GPU1: Pass                                     |
+-----  Hardware  ----------+------------------------------------------------+
| memory                    | Fail                                           |
| Warning                   | There was an internal error during the test:   |
|                           | 'A child process (152) exited with non-zero s  |
|                           | tatus 1' Check DCGM and system logs for error  |
|                           | s. Reset GPU. Restart DCGM. Rerun diagnostics  |
|                           | .                                              |
|                           | GPU0: Fail                                     |
| Warning: GPU0             | Error using CUDA API cuInit Check DCGM and sy  |
|                           | stem logs for errors. Reset GPU. Restart DCGM  |
|                           | . Rerun diagnostics. Unable to initialize CUD  |
|                           | A library: 'system not yet initialized'. . Pl  |
|                           | ease check if a CUDA sample program can be ru  |
|                           | n successfully on this host. Refer to https:/  |
|                           | /github.com/nvidia/cuda-samples                |
|                           | GPU1: Fail                                     |
| Warning: GPU1             | Error using CUDA API cuInit Check DCGM and sy  |
|                           | stem logs for errors. Reset GPU. Restart DCGM  |
|                           | . Rerun diagnostics. Unable to initialize CUD  |
|                           | A library: 'system not yet initialized'. . Pl  |
|                           | ease check if a CUDA sample program can be ru  |
|                           | n successfully on this host. Refer to https:/  |
|                           | /github.com/nvidia/cuda-samples                |
+-----  Integration  -------+------------------------------------------------+
| pcie                      | Pass                                           |
|                           | GPU0: Pass                                     |
| Info: GPU0                | GPU 0 GPU to Host bandwidth:  24.85 GB/s, GPU  |
|                           |  0 Host to GPU bandwidth:  25.90 GB/s, GPU 0   |
|                           | bidirectional bandwidth: 47.46 GB/s            |
|                           | GPU1: Skip                                     |
+---------------------------+------------------------------------------------+
";

#[test]
fn dcgm_text4_entity_warnings_belong_to_their_test() {
    let p = run(DCGM4_ENTITY_WARNINGS);
    // `Warning: GPU0` and `Info: GPU0` are no tests, and the GPU rows after them stay with theirs.
    assert_eq!(list(&p, "dcgm.diag.tests_run"), vec!["software", "memory"]);
    assert_eq!(list(&p, "dcgm.diag.failed_tests"), vec!["memory"]);
    assert_eq!(list(&p, "dcgm.diag.skipped_tests"), vec!["pcie"]);
    assert!(!boolean(&p, "dcgm.diag.passed"));
    // The internal error, and cuInit once (the same message from two GPUs of one test); the Info
    // is not a warning.
    assert_eq!(count(&p, "dcgm.diag.warnings"), 2.0);
    assert!(noted(
        &p,
        "memory: Error using CUDA API cuInit Check DCGM and system logs"
    ));
    assert!(noted(&p, "memory: There was an internal error during the test"));
    assert!(!noted(&p, "bandwidth"), "{:?}", p.warnings);
    assert!(!noted(&p, "unreadable"), "{:?}", p.warnings);
}

/// DCGM 2.x/3.x label a Deployment test's errors `Error` (NVIDIA/DCGM v3.3.8
/// 903d745504f50153be8293f8566346f9de3b3c93 and v2.4.7 0fb66990409818236a5fec5e9a795456351579b9,
/// dcgmi/Diag.cpp `HelperDisplayDeploymentResult`); the message is DCGM_FR_PENDING_ROW_REMAP's
/// (dcgmlib/dcgm_errors.h) with its next step, the frame that of
/// `dcgm-3.3.8-h100-x8-r3-fail-early-cuinit-fail-skip.txt`. It is the test's warning, as `-j` lists
/// it, not a test.
#[test]
fn dcgm_text3_a_deployment_error_block_is_a_warning_of_its_test() {
    let p = run("\
Successfully ran diagnostic for group.
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Metadata  ----------+------------------------------------------------|
| DCGM Version              | 3.3.8                                          |
| Driver Version Detected   | 560.35.03                                      |
| GPU Device IDs Detected   | 2330,2330,2330,2330                            |
|-----  Deployment  --------+------------------------------------------------|
| Denylist                  | Pass                                           |
| NVML Library              | Pass                                           |
| CUDA Main Library         | Pass                                           |
| Permissions and OS Blocks | Pass                                           |
| Persistence Mode          | Pass                                           |
| Environment Variables     | Pass                                           |
| Page Retirement/Row Remap | Fail                                           |
| Error                     | GPU 3 had memory errors and row remappings ar  |
|                           | e pending Check DCGM and system logs for erro  |
|                           | rs. Reset GPU. Restart DCGM. Rerun diagnostic  |
|                           | s.                                             |
| Graphics Processes        | Pass                                           |
| Inforom                   | Pass                                           |
+---------------------------+------------------------------------------------+
");
    assert_eq!(list(&p, "dcgm.diag.failed_tests"), vec!["Page Retirement/Row Remap"]);
    assert_eq!(list(&p, "dcgm.diag.tests_run").len(), 9);
    assert_eq!(count(&p, "dcgm.diag.warnings"), 1.0);
    assert!(noted(
        &p,
        "Page Retirement/Row Remap: GPU 3 had memory errors and row remappings are pending"
    ));
    assert!(!noted(&p, "unreadable"), "{:?}", p.warnings);
}

/// `dcgmi diag -j` of the run `DCGM4_ENTITY_WARNINGS` prints, as NVIDIA/DCGM v4.4.1 dcgmi/Diag.cpp
/// `HelperJsonBuildOutput` writes it (jsoncpp's `toStyledString`: keys sorted, three-space indent):
/// each entity's result with its warnings and info, then `test_summary` with the test's overall
/// result and, up to 4.4, only the warnings tied to no entity (`HelperJsonAddTestSummary`). The
/// overall result of pcie is Pass although GPU 1 skipped it: nvvs/src/ResultHelpers.cpp
/// `GetOverallDiagResult` answers Pass when any entity passed and none failed or warned.
const DCGM4_ENTITY_WARNINGS_JSON: &str = r#"{
   "DCGM Diagnostic" : {
      "test_categories" : [
         {
            "category" : "Deployment",
            "tests" : [
               {
                  "name" : "software",
                  "results" : [
                     {
                        "entity_group" : "GPU",
                        "entity_group_id" : 1,
                        "entity_id" : 0,
                        "status" : "Pass"
                     },
                     {
                        "entity_group" : "GPU",
                        "entity_group_id" : 1,
                        "entity_id" : 1,
                        "status" : "Pass"
                     }
                  ],
                  "test_summary" : {
                     "status" : "Pass"
                  }
               }
            ]
         },
         {
            "category" : "Hardware",
            "tests" : [
               {
                  "name" : "memory",
                  "results" : [
                     {
                        "entity_group" : "GPU",
                        "entity_group_id" : 1,
                        "entity_id" : 0,
                        "status" : "Fail",
                        "warnings" : [
                           {
                              "error_category" : 8,
                              "error_id" : 51,
                              "error_severity" : 4,
                              "warning" : "Error using CUDA API cuInit Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics. Unable to initialize CUDA library: 'system not yet initialized'. . Please check if a CUDA sample program can be run successfully on this host. Refer to https://github.com/nvidia/cuda-samples"
                           }
                        ]
                     },
                     {
                        "entity_group" : "GPU",
                        "entity_group_id" : 1,
                        "entity_id" : 1,
                        "status" : "Fail",
                        "warnings" : [
                           {
                              "error_category" : 8,
                              "error_id" : 51,
                              "error_severity" : 4,
                              "warning" : "Error using CUDA API cuInit Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics. Unable to initialize CUDA library: 'system not yet initialized'. . Please check if a CUDA sample program can be run successfully on this host. Refer to https://github.com/nvidia/cuda-samples"
                           }
                        ]
                     }
                  ],
                  "test_summary" : {
                     "status" : "Fail",
                     "warnings" : [
                        {
                           "error_category" : 16,
                           "error_id" : 44,
                           "error_severity" : 4,
                           "warning" : "There was an internal error during the test: 'A child process (152) exited with non-zero status 1' Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics."
                        }
                     ]
                  }
               }
            ]
         },
         {
            "category" : "Integration",
            "tests" : [
               {
                  "name" : "pcie",
                  "results" : [
                     {
                        "entity_group" : "GPU",
                        "entity_group_id" : 1,
                        "entity_id" : 0,
                        "info" : [
                           "GPU 0 GPU to Host bandwidth:  24.85 GB/s, GPU 0 Host to GPU bandwidth:  25.90 GB/s, GPU 0 bidirectional bandwidth: 47.46 GB/s"
                        ],
                        "status" : "Pass"
                     },
                     {
                        "entity_group" : "GPU",
                        "entity_group_id" : 1,
                        "entity_id" : 1,
                        "status" : "Skip"
                     }
                  ],
                  "test_summary" : {
                     "status" : "Pass"
                  }
               }
            ]
         }
      ]
   },
   "entity_groups" : [
      {
         "entities" : [
            {
               "device_id" : "26b9",
               "entity_id" : 0
            },
            {
               "device_id" : "26b9",
               "entity_id" : 1
            }
         ],
         "entity_group" : "GPU",
         "entity_group_id" : 1
      }
   ],
   "metadata" : {
      "Driver Version Detected" : "570.172.08",
      "version" : "4.4.1"
   }
}
"#;

/// The figures both forms of one run must agree on.
fn verdict(p: &Parsed) -> (bool, Vec<String>, Vec<String>, Vec<String>, f64) {
    (
        boolean(p, "dcgm.diag.passed"),
        list(p, "dcgm.diag.tests_run"),
        list(p, "dcgm.diag.failed_tests"),
        list(p, "dcgm.diag.skipped_tests"),
        count(p, "dcgm.diag.warnings"),
    )
}

#[test]
fn dcgm_json4_a_gpus_skip_under_a_pass_summary_is_a_skip_and_agrees_with_the_text() {
    let json = run(DCGM4_ENTITY_WARNINGS_JSON);
    assert_eq!(list(&json, "dcgm.diag.skipped_tests"), vec!["pcie"]);
    // The warning tied to no entity is only in `test_summary` (4.0 to 4.4).
    assert!(
        noted(&json, "memory: There was an internal error during the test"),
        "{:?}",
        json.warnings
    );
    assert_eq!(verdict(&json), verdict(&run(DCGM4_ENTITY_WARNINGS)));
    assert_eq!(
        verdict(&json),
        (
            false,
            vec!["software".to_string(), "memory".to_string()],
            vec!["memory".to_string()],
            vec!["pcie".to_string()],
            2.0
        )
    );
}

/// From 4.5 `test_summary.warnings` holds every warning of the test, those of each entity too
/// (NVIDIA/DCGM v4.5.0 e137795bc755d14fabc0e44c91178a364952cb43, dcgmi/Diag.cpp
/// `HelperJsonAddTestSummary` passes `includeAllErrors`): a repeat, not another warning.
#[test]
fn dcgm_json45_summary_repeats_are_not_more_warnings() {
    let mut v: serde_json::Value = serde_json::from_str(DCGM4_ENTITY_WARNINGS_JSON).unwrap();
    let memory = &mut v["DCGM Diagnostic"]["test_categories"][1]["tests"][0];
    let entity_warnings: Vec<serde_json::Value> = (0..2)
        .map(|gpu| memory["results"][gpu]["warnings"][0].clone())
        .collect();
    let summary = memory["test_summary"]["warnings"].as_array_mut().unwrap();
    summary.extend(entity_warnings);
    assert_eq!(summary.len(), 3);
    v["metadata"]["version"] = "4.5.0".into();
    let p = run(&serde_json::to_string_pretty(&v).unwrap());
    assert_eq!(verdict(&p), verdict(&run(DCGM4_ENTITY_WARNINGS_JSON)));
}

/// DCGM 2.x to 3.2 `-j` writes a result's warning as one string, from 3.2 with the result's
/// `error_id` beside it (NVIDIA/DCGM v3.2.5 4e0a87a8c7a9af99e0d911c491d9a65204f1a30e, dcgmi/Diag.cpp
/// `HelperJsonAddResult`, and for Deployment tests `HelperJsonAddBasicTests`; v2.4.7
/// 0fb66990409818236a5fec5e9a795456351579b9 the same without `error_id`). Messages from
/// dcgmlib/dcgm_errors.h (DCGM_FR_BAD_CUDA_ENV) and the cuInit one of
/// `dcgm-3.3.8-h100-x8-r3-fail-early-cuinit-fail-skip.txt`.
#[test]
fn dcgm_json3_a_warning_written_as_a_string_is_one_warning() {
    let p = run(r#"{
   "DCGM GPU Diagnostic" : {
      "test_categories" : [
         {
            "category" : "Deployment",
            "tests" : [
               {
                  "name" : "Environment Variables",
                  "results" : [
                     {
                        "status" : "Fail",
                        "warnings" : "Found CUDA performance-limiting environment variable 'CUDA_LAUNCH_BLOCKING'."
                     }
                  ]
               }
            ]
         },
         {
            "category" : "Hardware",
            "tests" : [
               {
                  "name" : "GPU Memory",
                  "results" : [
                     {
                        "error_id" : 51,
                        "gpu_ids" : "0",
                        "status" : "Fail",
                        "warnings" : "GPU 0 Error using CUDA API cuInit Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics. Unable to initialize CUDA library: 'system not yet initialized'."
                     },
                     {
                        "gpu_ids" : "1",
                        "status" : "Pass"
                     }
                  ]
               }
            ]
         }
      ],
      "version" : "3.2.5"
   }
}
"#);
    assert_eq!(
        list(&p, "dcgm.diag.failed_tests"),
        vec!["Environment Variables", "GPU Memory"]
    );
    assert_eq!(count(&p, "dcgm.diag.warnings"), 2.0);
    assert!(
        noted(&p, "GPU Memory: GPU 0 Error using CUDA API cuInit"),
        "{:?}",
        p.warnings
    );
    assert!(noted(&p, "(error_id 51)"), "{:?}", p.warnings);
}

/// dcgmi 3.1–3.3's `-j` puts the DCGM version and the driver beside the diagnostic, at the
/// document's top (NVIDIA/DCGM v3.3.9 dcgmi/Diag.cpp; testing/python3/dcgm_diag_schema.json).
#[test]
fn dcgm_json3_version_and_driver_at_the_top_are_kept() {
    let p = run(r#"{
   "DCGM GPU Diagnostic" : {
      "test_categories" : [
         { "category" : "Deployment",
           "tests" : [ { "name" : "Denylist", "results" : [ { "gpu_id" : 0, "status" : "Pass" } ] } ] }
      ]
   },
   "Driver Version Detected" : "560.35.03",
   "GPU Device IDs" : [ "2330" ],
   "version" : "3.3.9"
}"#);
    assert_eq!(p.metrics.get("dcgm.version"), Some(&MetricValue::Text("3.3.9".into())));
    assert_eq!(
        p.metrics.get("gpu.driver_version"),
        Some(&MetricValue::Text("560.35.03".into()))
    );
    assert_eq!(p.tool_version.as_deref(), Some("3.3.9"));
}

/// DCGM 3.3 writes a Deployment test's warnings as objects whose message is under `warnings`,
/// not `warning` (NVIDIA/DCGM v3.3.8 903d745504f50153be8293f8566346f9de3b3c93, dcgmi/Diag.cpp
/// `HelperJsonAddBasicTests`).
#[test]
fn dcgm_json33_a_deployment_warning_under_warnings_is_read() {
    let p = run(r#"{
   "DCGM GPU Diagnostic" : {
      "test_categories" : [
         {
            "category" : "Deployment",
            "tests" : [
               {
                  "name" : "Environment Variables",
                  "results" : [
                     {
                        "gpu_id" : 0,
                        "status" : "Fail",
                        "warnings" : [
                           {
                              "error_category" : 8,
                              "error_id" : 28,
                              "error_severity" : 4,
                              "warnings" : "Found CUDA performance-limiting environment variable 'CUDA_LAUNCH_BLOCKING'."
                           }
                        ]
                     }
                  ]
               }
            ]
         }
      ],
      "version" : "3.3.8"
   }
}
"#);
    assert_eq!(list(&p, "dcgm.diag.failed_tests"), vec!["Environment Variables"]);
    assert_eq!(count(&p, "dcgm.diag.warnings"), 1.0);
    assert!(
        noted(&p, "Environment Variables: Found CUDA performance-limiting"),
        "{:?}",
        p.warnings
    );
}

/// DCGM 4.5 and later: a GPU that ran no test (detached) is `GPU1: Not Run` under a test whose
/// own row says Pass (NVIDIA/DCGM v4.5.0 e137795bc755d14fabc0e44c91178a364952cb43,
/// `DcgmDiagResponseWrapper.cpp` gives it `DCGM_DIAG_RESULT_NOT_RUN`, dcgmi/Diag.cpp prints it).
/// Not every GPU ran it: a skip, not a pass.
#[test]
fn dcgm_text45_a_gpu_that_did_not_run_is_a_skip() {
    let input = "\
Successfully ran diagnostic for group.
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Metadata  ----------+------------------------------------------------|
| DCGM Version              | 4.5.0                                          |
|-----  Deployment  --------+------------------------------------------------|
| software                  | Pass                                           |
|                           | GPU0: Pass                                     |
|                           | GPU1: Not Run                                  |
| Warning: GPU1             | GPU 1 is detached.                             |
+-----  Hardware  ----------+------------------------------------------------+
| pcie                      | Pass                                           |
|                           | GPU0: Pass                                     |
|                           | GPU1: Not Run                                  |
+---------------------------+------------------------------------------------+
";
    let p = run(input);
    assert!(!boolean(&p, "dcgm.diag.passed"));
    assert_eq!(list(&p, "dcgm.diag.skipped_tests"), vec!["software", "pcie"]);
    assert_eq!(list(&p, "dcgm.diag.failed_tests"), Vec::<String>::new());
    assert!(!noted(&p, "unreadable entity result"), "{:?}", p.warnings);
}

/// The same in `-j`: DCGM 4.5 writes no result for the GPU that did not run the test, and its
/// `test_summary` still says Pass. A GPU of `entity_groups` without a result is a skip; before
/// 4.5 a missing result is not read that way (older releases wrote every GPU's result).
#[test]
fn dcgm_json45_a_gpu_without_a_result_is_a_skip() {
    let real = include_str!("../../../../tests/fixtures/dcgm-diag/dcgm4-json-r2-all-pass.json");
    let without_gpu1 = |version: &str| {
        let mut v: serde_json::Value = serde_json::from_str(real).unwrap();
        v["metadata"]["version"] = serde_json::json!(version);
        let pcie = &mut v["DCGM Diagnostic"]["test_categories"][2]["tests"][0];
        assert_eq!(pcie["name"], "pcie");
        pcie["results"].as_array_mut().unwrap().retain(|r| r["entity_id"] != 1);
        v.to_string()
    };
    let p = run(&without_gpu1("4.5.0"));
    assert!(!boolean(&p, "dcgm.diag.passed"));
    assert_eq!(list(&p, "dcgm.diag.skipped_tests"), vec!["pcie"]);
    assert!(noted(&p, "GPU 1 has no result"), "{:?}", p.warnings);
    let p = run(&without_gpu1("4.1.1"));
    assert!(boolean(&p, "dcgm.diag.passed"));
    assert!(boolean(&run(real), "dcgm.diag.passed"));
}

/// `dcgmi diag -r 2 -j --iterations 2` (DCGM's `NVVS_ITERATIONS` / `NVVS_RESULT`, nvvs/include/
/// NvvsJsonStrings.h): each iteration's report in a list. A test that failed in one iteration
/// fails (it was refused: no "DCGM Diagnostic" at the top).
#[test]
fn dcgm_json_iterations_keep_each_tests_worst_result() {
    let first: serde_json::Value = serde_json::from_str(DCGM4_ENTITY_WARNINGS_JSON).unwrap();
    let mut second = first.clone();
    second["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][0]["status"] = serde_json::json!("Fail");
    let name = first["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let wrapped = serde_json::json!({ "iterations": [first, second], "Overall Result": "Fail" });
    let p = run(&serde_json::to_string_pretty(&wrapped).unwrap());
    let once = run(DCGM4_ENTITY_WARNINGS_JSON);
    assert!(!list(&once, "dcgm.diag.failed_tests").contains(&name), "passes once");
    assert!(
        list(&p, "dcgm.diag.failed_tests").contains(&name),
        "{:?}",
        list(&p, "dcgm.diag.failed_tests")
    );
    assert_eq!(p.metrics.get("dcgm.diag.passed"), Some(&MetricValue::Bool(false)));
    // The same warnings in both iterations count once.
    assert_eq!(count(&p, "dcgm.diag.warnings"), count(&once, "dcgm.diag.warnings"));
    assert!(noted(&p, "2 iterations"), "{:?}", p.warnings);
}
