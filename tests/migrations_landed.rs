//! Migrations that have shipped never change: sqlx keeps each applied file's SHA-384 and refuses to
//! start on a database whose applied migration no longer matches, so an edit to a shipped file
//! would stop every existing installation at its next start. Change the schema with a new
//! migration instead, and add a line here when one lands: a migration file that is not pinned here
//! fails the second test, so a new one cannot ship unnoticed.

use sha2::{Digest, Sha384};

/// (file, SHA-384 of its bytes) for every migration that has shipped.
const LANDED: [(&str, &str); 41] = [
    (
        "20261129000001_briefs.sql",
        "3da3459b1a196965ab142ded4236fd632aaa98e7935dee107dceb51da58dae7e67e1743137d1fe01cff709a1484e0cf4",
    ),
    (
        "20261129000002_auth.sql",
        "a773c0dfefe2e4c9324be8ac48c6e7355d4448f72b9ee89caec41fc17cc957cd81f45861de37fdcf19780700b5a88da6",
    ),
    (
        "20261129000003_evidence.sql",
        "a721906af4b8f52b1267ecfa9b697c5febea421e6ca262e26068710cd835082469429b0f6415c0edf21060396bd6de19",
    ),
    (
        "20261129000004_ledger.sql",
        "7ccaa276af4b78304c02bd2ef2ecac99efdbc8698aa7ba67b47d5c7ea6cc65bad8390e1e8be008ffc1f1a44da3b3b5ae",
    ),
    (
        "20261129000005_cards.sql",
        "ced1eb622e63e30efad33c8b1c944f395f5f527f41a22e018f19996ec378dde98ee9caae864bc6cbcc87c9e6752f0c6c",
    ),
    (
        "20261129000006_evidence_metrics.sql",
        "bea7f6a6d5c5cd2732efe6bc73fa1ed60a8495fe628aa634e4081856a89168148bb149ac3aa0ec108a7898c349517de0",
    ),
    (
        "20261129000007_approvals.sql",
        "095003eecfa090ef05d18f7aba026abbf87332403173a0c78a21ca5937ec61cb66da55cf5c1281f9400924adf6c4a60a",
    ),
    (
        "20261129000008_lighter_evidence_writes.sql",
        "cb5a478cf45ecedcfb86f82fbc3e36439e4dc3fe423a39f8666a37419cdd99bfe5e680507392d57ae0ef6d54d7a3e940",
    ),
    (
        "20261129000009_evidence_metrics_queue_functions.sql",
        "089eeb1145174d5b6ced5a1d55954419d2dc60b7534401472495b4a6a9727c35449a808b18ba535d6c3f477624164052",
    ),
    (
        "20261129000010_evidence_object_store.sql",
        "2357b2d5b933f45e646b275226c475f2937ad040df81547107598215fdd7a306beedc90a2087d6c3db982b8c0fe6f696",
    ),
    (
        "20261130000001_trials.sql",
        "370ca112c122933b5c7eccffef1f15862f3e8621706e872e7ec1a3608a0f0a12c5408697eec886c83cacdaccac8bba79",
    ),
    (
        "20261130000002_prices.sql",
        "a505ae4649029ea00ddb1c63fa320edcef433a860487a44bcc484a77a2256cd3d08923009260dbea7fd4f5e32baff2b6",
    ),
    (
        "20261130100001_evidence_kind_dcgm_exporter.sql",
        "e0c09899b6d349ff15b2acf54d5173cb0fd7f44b54360cee13ecafdd4a05d929bf19064fe81b0f8553d74324db4094ac",
    ),
    (
        "20261130200001_brief_architecture.sql",
        "babb1e56704d953b5cf26997dde6d5f8947645f9cae70016efadefdcf730c962985261590f8eb4bec2e2e10f17070659",
    ),
    (
        "20261130500001_teams_and_trust.sql",
        "e47657763a887de10b66212f8ef3fdd3dc5a23083e985fd9a4018d5b6973a2fd065158264a3aa6a2774cdbacdcd7d0ae",
    ),
    (
        "20261201100000_signals_out.sql",
        "818de17dcff0f4f9d76c5e85a2239461d4cdcf119c965acab4ca39eddbb435ae7f7d3f34a57611d6d05c8b79e0bb2d38",
    ),
    (
        "20261201130001_card_revision_allocation.sql",
        "93761531b7672697f5fc0b639f3c7f7f267ff22525ddc54996e087ac7b8d5ae5d275a472e924d43a9d59ed889b0c0400",
    ),
    (
        "20261201160000_review_summaries.sql",
        "3d83b1d6bd5c673ffffaa1aa50f75fb907e70f6ab8c62626612dda845737bae7066db159d9766bfa0579775b1fd27617",
    ),
    (
        "20261201170000_brief_changes_taken.sql",
        "5109c5e25ecd34e99dbb95a6492a19fadb1e5b195a8c252148c10b814c5b0bdcd120c63777541452c463db894552c434",
    ),
    (
        "20261201180000_statement_level_evidence_triggers.sql",
        "9de12602ade2a9656b4a9b247534c2e1a39b790aaeea4af64eb5cc083897e236dd34f3f64a0336469308d2c102383ff1",
    ),
    (
        "20261201190000_evidence_lz4_compression.sql",
        "64802b5cd7a4143173da4c62eb745f0af4738ddea5492f5eaf6af747e70cd95b011ec12af87343d3953541c5c71612ef",
    ),
    (
        "20261201200000_briefs_search_trigram.sql",
        "5bc1449c73556ab6555e38d75a965e854bdd6e66b828bd61d36be08e666a8b48fcf4f0f4819ea9381af5652cb26f634b",
    ),
    (
        "20261202160001_price_rows_per_billing.sql",
        "fa791d93879853ff4e3363c38009b7726cf25eecce52e3220148160d1b91318d5227db6ace5946ab61a92dbd15ae2c09",
    ),
    (
        "20261202160002_ledger_focus_rows.sql",
        "aaafaeaa7a8aac4efe0061acc74d65567998d8a9a5884045b05d1d26aa917510c4f9c3b094ab43d51a1217fdba623b58",
    ),
    (
        "20261203100000_evidence_metrics_set_aside.sql",
        "4c253514d999bffeff150b652c1faf3c1a6b45821c9ef09868fe9692fae451a57ca850a5428ef4fb2f101490bf23daa4",
    ),
    (
        "20261202100000_decision_truth.sql",
        "e99fb0aeef86f1a818ec86905f3304d187fd6a1c23fddbeb21c6a4ef29ba5b940e0505c079860928cd47555020cf48d0",
    ),
    (
        "20261202130001_sign_in_throttle.sql",
        "7ede388128a99e0a0d966b5fa36176e8bbe075a4198442743e71a740fd4f2bc42eca29ded1cd44d3f509d547e6afc2e8",
    ),
    (
        "20261202130002_audit_log_no_truncate.sql",
        "fdff5641c64ae57d9c62728c03e03225f71379f8be1a7d43733d6c05be568a767ab98406cec9bc6556324b85fb9a804b",
    ),
    (
        "20261203110000_review_summary_rules_version.sql",
        "597fa033a08e549e3ef7ad3b78afa1b5e23a59e3356b6d1058be391368c26c1a1a732f8c21196c5aafa23153f6823a0d",
    ),
    (
        "20261203120000_trial_stage_totals.sql",
        "3a131338a064bce8546e3ddf3b6ef304377bc4810d5feaa3fbc074d166db8f76cf776357a592a5f227ddb864a6d26a67",
    ),
    (
        "20261203130000_auth_changed_notify.sql",
        "7dc412fd20e09de04badc83d015b92d31f7b7708b7cefab913faabeb73fa5545e8dcfb04b67076f23689318ad04a1e1c",
    ),
    (
        "20261203140000_evidence_metric_keys_digest.sql",
        "b19184b9b133d4f5bc3df9620437b8c212864fe62ff7f414a21541c1cbe058ff5e1e9a5410b61dc304a409f357add1bc",
    ),
    (
        "20261206100000_approval_override.sql",
        "3eeed20bb4ce9c63d0d1ae76748c0232b3f6cf4f0ab482419fcda9ec92d34a6c90a31b011962e5166b9c906bf121eb39",
    ),
    (
        "20261206110000_commitments.sql",
        "873b67a5a8688c3a5cbec556a596c5a701cea67c9c9794c553f13952431f5a7533743b23482761acd70fe9c0a3d917f4",
    ),
    (
        "20261206120000_ledger_commitment_rows.sql",
        "0c3b3b67ccc3ed3e8f245dcef0c3beeeb833facfdead0f3718cb02cc4899e5a18e5fe8df69fd0d9ce7250f6dec7a7248",
    ),
    (
        "20261206160000_ledger_accelerator_daily.sql",
        "165fd0b42867f27952ab22e1c8e0ae008891ce68cdad3061147e0ac8adf395609e0f5a43cbd58dc32e005cec5522e157",
    ),
    (
        "20261206210000_review_tables_renamed.sql",
        "3210c0068a3c92a039438fa560872c6d37e1b9f98e14f31c03728f0ea72024afade617001bf1eab17be93bc1a858e178",
    ),
    (
        "20261207120000_price_catalogue_instances.sql",
        "c29909379cc33a939c0413a8128b9b83e2be334e4c236458008375759a6fa6df005ad0756aa9bb751953c08c4cd352aa",
    ),
    (
        "20261207130000_commitment_release_ahead.sql",
        "c411f2e8433719c99f931a039c2e2f52e2b50b4993dca60a5d3ee4d8325be287954a26c1683c8a109d36f927a5395557",
    ),
    (
        "20261207230000_load_tests_own_concurrency_key.sql",
        "580e5fc8b10edc442b307d7bac252f06f0d6dca578d7e52686aa8b5d897b619e0b5e9f95da0631070dac9d21edfd23d1",
    ),
    (
        "20261208000000_ledger_lines_repeat_index.sql",
        "b608b6b7e54d0936d34bb8c8c6bd294993960e3bb510db676dcc1775db708847792585a3f328a924606a1a7bd04d0a89",
    ),
];

#[test]
fn shipped_migrations_are_unchanged() {
    for (file, expected) in LANDED {
        let bytes = std::fs::read(format!("migrations/{file}")).unwrap_or_else(|e| panic!("{file}: {e}"));
        let actual = hex::encode(Sha384::digest(&bytes));
        assert_eq!(
            actual, expected,
            "{file} has shipped: change the schema in a new migration"
        );
    }
}

#[test]
fn every_migration_is_pinned() {
    let mut unpinned = Vec::new();
    for entry in std::fs::read_dir("migrations").expect("migrations/") {
        let name = entry
            .expect("a directory entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if name.ends_with(".sql") && !LANDED.iter().any(|(file, _)| *file == name) {
            unpinned.push(name);
        }
    }
    unpinned.sort();
    assert!(
        unpinned.is_empty(),
        "pin these migrations in LANDED (file and `sha384sum` of it) when they land: {unpinned:?}"
    );
}
