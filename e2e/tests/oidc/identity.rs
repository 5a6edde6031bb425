//! One identity per person: a name is bound to the provider's subject (issuer and `sub`) the
//! first time it signs in, and another account carrying the same name is refused with a page
//! saying so; a name in another spelling (full-width letters) is refused; with
//! `username_claim = "email"` only an address the provider verified is a name.

use breakglass_e2e::agent::Agent;
use breakglass_e2e::hydra::Persona;

use super::Setup;

#[tokio::test]
async fn two_accounts_with_one_name_are_not_one_person() -> anyhow::Result<()> {
    let s = Setup::start(None, "").await?;
    let first = Agent::new()?;
    let me = s.sign_in(&first, Persona::new("hank", &["sre"])).await?;
    assert_eq!(me["user"]["name"], "hank");

    // Another account at the provider (another `sub`) whose name is also hank.
    let other = Agent::new()?;
    s.provider.script(
        &s.client,
        Persona {
            subject: Some("hank-from-the-merger".into()),
            ..Persona::new("hank", &["sre"])
        },
    );
    let callback = s.to_callback(&other).await?;
    let page = s
        .expect_page(&other, callback.as_str(), 403, "name-taken")
        .await?;
    assert!(page.contains("belongs to another account"), "{page}");
    // The first hank is untouched, and signs in again as himself.
    assert_eq!(s.whoami(&first).await?["user"]["name"], "hank");
    let again = Agent::new()?;
    let me = s.sign_in(&again, Persona::new("hank", &["sre"])).await?;
    assert_eq!(me["user"]["name"], "hank");

    // A name in another spelling of an existing one never reaches the system.
    let wide = Agent::new()?;
    s.provider
        .script(&s.client, Persona::new("ｈａｎｋ", &["sre"]));
    let callback = s.to_callback(&wide).await?;
    let page = s
        .expect_page(&wide, callback.as_str(), 403, "refused-name")
        .await?;
    assert!(page.contains("Unicode normalisation"), "{page}");
    Ok(())
}

#[tokio::test]
async fn an_email_name_counts_only_when_the_provider_verified_it() -> anyhow::Result<()> {
    let s = Setup::start(None, "username_claim = \"email\"").await?;
    let agent = Agent::new()?;
    s.provider.script(
        &s.client,
        Persona {
            email_unverified: true,
            ..Persona::new("ivy", &["sre"])
        },
    );
    let callback = s.to_callback(&agent).await?;
    let page = s
        .expect_page(&agent, callback.as_str(), 403, "unverified-email")
        .await?;
    assert!(page.contains("not verified"), "{page}");
    let me = s.sign_in(&agent, Persona::new("ivy", &["sre"])).await?;
    assert_eq!(me["user"]["name"], "ivy@example.test");
    Ok(())
}
