//! Search across contacts, companies and deals, within the caller's scopes.

use crm_domain::{CompanyDraft, DealDraft};

use crate::support::{env, person};

#[tokio::test]
async fn search_finds_each_kind_of_record_by_a_substring() {
    let env = env().await;
    env.app
        .create_contact(&env.caller, person("Adaline", "ada@example.com"), None)
        .await
        .unwrap();
    env.app
        .create_contact(&env.caller, person("Grace", "grace@example.com"), None)
        .await
        .unwrap();
    let company = CompanyDraft {
        name: Some("Adacorp".into()),
        ..Default::default()
    };
    env.app
        .create_company(&env.caller, company, None)
        .await
        .unwrap();
    let deal = DealDraft {
        title: Some("Ada renewal".into()),
        ..Default::default()
    };
    env.app
        .create_deal(&env.caller, deal, None, None)
        .await
        .unwrap();
    let found = env.app.search(&env.caller, "ada", 10).await.unwrap();
    let contacts = found.contacts.unwrap();
    assert_eq!(contacts.data.len(), 1);
    assert_eq!(contacts.data[0].first_name.as_deref(), Some("Adaline"));
    assert_eq!(found.companies.unwrap().data.len(), 1);
    assert_eq!(found.deals.unwrap().data.len(), 1);
}

#[tokio::test]
async fn search_leaves_out_the_kinds_the_key_may_not_read() {
    let env = env().await;
    let new = env
        .app
        .create_key(
            &env.caller,
            Some("deals".into()),
            Some(vec!["deals:read".into()]),
        )
        .await
        .unwrap();
    let deals_only = env
        .app
        .authenticate(Some(&format!("Bearer {}", new.secret)))
        .await
        .unwrap();
    let found = env.app.search(&deals_only, "x", 10).await.unwrap();
    assert!(found.contacts.is_none() && found.companies.is_none());
    assert!(found.deals.is_some());
}
