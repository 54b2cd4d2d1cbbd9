//! The ledger section of the brief page: forms (with CSRF), the summary, the chart and the export.

use crate::common;
use crate::common::builders::BriefBuilder;

use common::spawn_app;

#[tokio::test]
async fn adding_a_line_through_the_form_changes_the_summary() {
    let app = spawn_app().await;
    let id = BriefBuilder::new().create_id(&app).await;
    let person = app.login_owner().await;
    let page_url = app.url(&format!("/briefs/{id}"));

    let page = person.client.get(&page_url).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("id=\"ledger\""));
    assert!(
        page.contains("not known yet — nothing accepted"),
        "the cost per completed job is not known at first"
    );
    assert!(page.contains("No ledger lines yet."));
    assert!(page.contains("class=\"bars cost-chart\""));

    // An accelerator line priced by rate: 2 h × 4 GPUs × 2.50 = 20.00.
    let res = person
        .client
        .post(app.url(&format!("/briefs/{id}/ledger/lines")))
        .form(&[
            ("csrf_token", person.csrf.as_str()),
            ("category", "accelerator"),
            ("resource", "node-a"),
            ("description", "trial <b>run</b>"),
            ("starts_at", "2026-03-01T00:00:00Z"),
            ("ends_at", "2026-03-01T02:00:00Z"),
            ("gpus", "4"),
            ("rate_per_gpu_hour", "2.50"),
            ("amount", ""),
            ("currency", ""),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let res = person
        .client
        .post(app.url(&format!("/briefs/{id}/ledger/outputs")))
        .form(&[
            ("csrf_token", person.csrf.as_str()),
            ("accepted", "8"),
            ("rejected", "2"),
            ("retries", "1"),
            ("failed_jobs", "3"),
            ("idle_hours", "2"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);

    let page = person.client.get(&page_url).send().await.unwrap().text().await.unwrap();
    // 20.00 / 8 accepted = 2.50 per completed job; failed jobs and idle hours only beside it.
    assert!(page.contains("2.50 USD"), "cost per job shown");
    assert!(!page.contains("nothing accepted yet"));
    assert!(page.contains("node-a"));
    assert!(
        page.contains("trial &#60;b&#62;run") && !page.contains("<b>run"),
        "descriptions are escaped"
    );
    assert!(page.contains("<dt>Failed jobs</dt><dd>3</dd>"));
    // 8 GPU-hours billed, 2 idle → 75 %.
    assert!(page.contains("75.0 %"), "utilization");
    assert!(page.contains("width=\"300\""), "the largest bar spans the chart");

    // A bad line is refused with its field named, and nothing is stored.
    let res = person
        .client
        .post(app.url(&format!("/briefs/{id}/ledger/lines")))
        .form(&[
            ("csrf_token", person.csrf.as_str()),
            ("category", "host"),
            ("amount", "-5"),
            ("currency", "EUR"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let body = res.text().await.unwrap();
    assert!(body.contains("amount") && body.contains("EUR"), "{body}");

    // Outputs typed as people write them are read (1,200); refused ones show the page again with
    // what was typed, the message at its field, and nothing stored (it was a bare error page).
    let outputs = |accepted: &'static str, idle: &'static str| {
        vec![
            ("csrf_token", person.csrf.clone()),
            ("accepted", accepted.to_owned()),
            ("rejected", "2".to_owned()),
            ("idle_hours", idle.to_owned()),
        ]
    };
    let url = app.url(&format!("/briefs/{id}/ledger/outputs"));
    let res = person
        .client
        .post(&url)
        .form(&outputs("1,200", "2"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let page = person.client.get(&page_url).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("<dt>Accepted outputs</dt><dd>1,200</dd>"), "{page}");
    let res = person
        .client
        .post(&url)
        .form(&outputs("lots", "1,5"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let page = res.text().await.unwrap();
    assert!(page.contains("The outputs were not saved"), "{page}");
    assert!(
        page.contains("id=\"outputs-accepted\" inputmode=\"numeric\" value=\"lots\""),
        "{page}"
    );
    assert!(
        page.contains("id=\"outputs-idle_hours\" inputmode=\"decimal\" value=\"1,5\""),
        "{page}"
    );
    assert!(page.contains("id=\"outputs-accepted-error\""), "{page}");
    assert!(page.contains("Accepted: must be a whole number"), "{page}");
    let page = person.client.get(&page_url).send().await.unwrap().text().await.unwrap();
    assert!(
        page.contains("<dt>Accepted outputs</dt><dd>1,200</dd>"),
        "nothing stored"
    );
    let res = person.client.post(&url).form(&outputs("8", "2")).send().await.unwrap();
    assert_eq!(res.status(), 303);

    // Without the CSRF token the form is refused.
    let res = person
        .client
        .post(app.url(&format!("/briefs/{id}/ledger/lines")))
        .form(&[("category", "host"), ("amount", "5")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert_eq!(app.count("ledger_lines").await, 1);

    // A pasted CSV imports all or nothing, and the export has every line.
    let csv = "category,resource,description,starts_at,ends_at,gpus,rate_per_gpu_hour,amount,currency\n\
               host,vm,,,,,,4,USD\nstorage,,,,,,,1,USD\n";
    let res = person
        .client
        .post(app.url(&format!("/briefs/{id}/ledger/import")))
        .form(&[("csrf_token", person.csrf.as_str()), ("csv", csv)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let res = person
        .client
        .post(app.url(&format!("/briefs/{id}/ledger/import")))
        .form(&[
            ("csrf_token", person.csrf.as_str()),
            ("csv", &format!("{csv}host,,,,,,,x,USD\n")),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    // The refusal is at the field, names the trial, keeps what was sent and leads back.
    let refused = res.text().await.unwrap();
    assert!(refused.contains("line 4, column 8 (amount)"));
    assert!(refused.contains("The ledger import was not stored"), "{refused}");
    assert!(
        refused.contains("aria-describedby=\"import-csv-error\""),
        "the message is at the paste box"
    );
    assert!(refused.contains("host,,,,,,,x,USD"), "the pasted text is kept");
    assert!(
        refused.contains("Nothing was added to trial <strong>“"),
        "the trial is named"
    );
    assert!(
        refused.contains(&format!("href=\"/briefs/{id}?trial=")),
        "a way back to the brief's ledger"
    );
    assert_eq!(app.count("ledger_lines").await, 3);
    // A FOCUS import with a bad GPUs-per-resource: the message at that field, the choices kept.
    let res = person
        .client
        .post(app.url(&format!("/briefs/{id}/ledger/import")))
        .form(&[
            ("csrf_token", person.csrf.as_str()),
            ("format", "focus"),
            ("resources", "i-0abc"),
            ("gpus_per_resource", "eight"),
            ("csv", "BilledCost\n1\n"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let refused = res.text().await.unwrap();
    assert!(refused.contains("id=\"import-gpus-error\""), "{refused}");
    assert!(refused.contains("value=\"eight\""), "the value typed is kept");
    assert!(
        refused.contains("<option value=\"focus\" selected>"),
        "the format chosen is kept"
    );
    assert!(refused.contains(">i-0abc</textarea>"));

    let export = person
        .client
        .get(app.url(&format!("/briefs/{id}/ledger.csv")))
        .send()
        .await
        .unwrap();
    assert_eq!(export.status(), 200);
    let text = export.text().await.unwrap();
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(text.contains("accelerator,node-a,trial <b>run</b>,2026-03-01T00:00:00Z,2026-03-01T02:00:00Z,4,2.5,20,USD"));
    let page = person.client.get(&page_url).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("3.13 USD"), "25.00 / 8 = 3.125 → 3.13 shown");
}
