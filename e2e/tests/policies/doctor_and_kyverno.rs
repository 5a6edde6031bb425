//! The doctor against real clusters (everything in place; missing and drifted items with their fix) and the Kyverno manifests against Kyverno's schemas.

use super::*;

// ---------------------------------------------------------------------------------------------
// doctor

#[tokio::test]
async fn doctor_finds_every_guardrail_in_place() -> anyhow::Result<()> {
    let cp = guardrails().await?;
    let config = config(cp)?;
    let env = config.environment(SA_ENV).context("env")?;
    // With the server's own credentials, as the guardrails API will.
    let client = cp.client(Identity::BreakglassSa).await?;
    let report = doctor(&client, &config, env).await?;
    let bad: Vec<_> = report
        .items
        .iter()
        .filter(|i| i.status != ItemStatus::Ok)
        .collect();
    assert!(report.ok && bad.is_empty(), "{bad:#?}");
    assert_eq!(
        report.identity.as_deref(),
        Some(cp.username(Identity::BreakglassSa)?)
    );
    let names: Vec<&str> = report.items.iter().map(|i| i.name.as_str()).collect();
    for expected in [
        "server identity",
        "ClusterRole tower-breakglass-debug-live",
        "ClusterRole tower-breakglass-debug-copy",
        "ClusterRoleBinding tower-breakglass-binder",
        "ValidatingAdmissionPolicy tower-breakglass-grant",
        "ValidatingAdmissionPolicyBinding tower-breakglass-no-exec",
        "debug image pin (ConfigMap breakglass/tower-breakglass-debug-image)",
        "access: bind ClusterRole tower-breakglass-debug-live (binder right)",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} not checked: {names:?}"
        );
    }
    let rendered = rendered(cp, SA_ENV)?;
    assert_eq!(report.items.len(), 1 + rendered.len() + 5);
    // The report is what the guardrails API will serve.
    let v = serde_json::to_value(&report)?;
    assert_eq!(v["items"][0]["status"], "ok");

    // The CLI path: configuration file and kubeconfig.
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("config.toml");
    std::fs::write(
        &file,
        format!("[[environments]]\nname = \"{SA_ENV}\"\ntier = \"flight\"\n"),
    )?;
    let args = breakglass_server::cli::doctor::DoctorArgs {
        cluster: Some(SA_ENV.into()),
        bucket: false,
        kubeconfig: Some(cp.kubeconfig_path(Identity::BreakglassSa)?.to_owned()),
        context: None,
        json: false,
        serve: ServeArgs {
            config: Some(file),
            ..ServeArgs::default()
        },
    };
    let report = breakglass_server::cli::doctor::run(&args).await?;
    assert!(
        report.ok,
        "{}",
        breakglass_server::cli::doctor::format_report(&report)
    );
    Ok(())
}

#[tokio::test]
async fn doctor_reports_missing_and_drifted_items_with_their_fix() -> anyhow::Result<()> {
    let cp = guardrails().await?;
    let sa = cp.client(Identity::BreakglassSa).await?;

    // Another server namespace and another debug image: the namespace and what lives in it
    // are missing, the pin drifted.
    let other_image = format!("registry.example/debug@sha256:{}", "a".repeat(64));
    let file: FileConfig = toml::from_str(&format!(
        "server_namespace = \"breakglass-elsewhere\"\ndebug_image = \"{other_image}\"\n[[environments]]\nname = \"{SA_ENV}\"\ntier = \"flight\"\n"
    ))?;
    let elsewhere = Config::resolve(&ServeArgs::default(), file)?;
    let env = elsewhere.environment(SA_ENV).context("env")?;
    let report = doctor(&sa, &elsewhere, env).await?;
    assert!(!report.ok);
    let item = |name: &str| {
        report
            .items
            .iter()
            .find(|i| i.name == name)
            .unwrap_or_else(|| panic!("no item {name}"))
    };
    assert_eq!(
        item("Namespace breakglass-elsewhere").status,
        ItemStatus::Missing
    );
    assert_eq!(
        item("Role breakglass-elsewhere/tower-breakglass-server").status,
        ItemStatus::Missing
    );
    let fix = format!(
        "breakglass-server policies render --cluster {SA_ENV} --identity {} | kubectl apply -f -",
        cp.username(Identity::BreakglassSa)?
    );
    assert_eq!(
        item("Namespace breakglass-elsewhere").fix.as_deref(),
        Some(fix.as_str())
    );
    assert_eq!(report.fix, fix);
    // The bindings name the parameter in the other namespace: drifted.
    let eph = item("ValidatingAdmissionPolicyBinding tower-breakglass-ephemeral");
    assert_eq!(eph.status, ItemStatus::Drifted, "{eph:?}");
    assert!(eph.detail.contains("paramRef.namespace"), "{}", eph.detail);
    // The grant policy protects the other namespace, not `breakglass`: drifted.
    assert_eq!(
        item("ValidatingAdmissionPolicy tower-breakglass-grant").status,
        ItemStatus::Drifted
    );
    assert_eq!(
        item("ClusterRole tower-breakglass-debug-live").status,
        ItemStatus::Ok
    );

    let config_pinned = Config::resolve(&ServeArgs::default(), toml::from_str(&format!(
        "debug_image = \"{other_image}\"\n[[environments]]\nname = \"{SA_ENV}\"\ntier = \"flight\"\n"
    ))?)?;
    let report = doctor(
        &sa,
        &config_pinned,
        config_pinned.environment(SA_ENV).context("env")?,
    )
    .await?;
    let pin = report
        .items
        .iter()
        .find(|i| i.name.starts_with("debug image pin"))
        .context("pin item")?;
    assert_eq!(pin.status, ItemStatus::Drifted);
    assert!(
        pin.detail.contains(DEFAULT_DEBUG_IMAGE) && pin.detail.contains(&other_image),
        "{}",
        pin.detail
    );

    // Checked with other credentials than the ones the guardrails name: the objects name the
    // service account, not the identity checking (here the admin, who can read everything):
    // drifted, and the configured identity is wrong.
    let admin = cp.client(Identity::Admin).await?;
    let wrong = Config::resolve(
        &ServeArgs::default(),
        toml::from_str(&format!(
            "[[environments]]\nname = \"{SA_ENV}\"\ntier = \"flight\"\nidentity = \"someone-else\"\n"
        ))?,
    )?;
    let report = doctor(&admin, &wrong, wrong.environment(SA_ENV).context("env")?).await?;
    let item = |name: &str| {
        report
            .items
            .iter()
            .find(|i| i.name == name)
            .unwrap_or_else(|| panic!("no item {name}"))
    };
    assert_eq!(item("server identity").status, ItemStatus::Drifted);
    assert!(item("server identity")
        .fix
        .as_deref()
        .unwrap_or_default()
        .contains("identity = \"admin\""));
    let grant = item("ValidatingAdmissionPolicy tower-breakglass-grant");
    assert_eq!(grant.status, ItemStatus::Drifted);
    assert!(
        grant.detail.contains("matchConditions[0].expression"),
        "{}",
        grant.detail
    );
    let binder = item("ClusterRoleBinding tower-breakglass-binder");
    assert_eq!(binder.status, ItemStatus::Drifted);
    assert!(
        binder.detail.starts_with("subjects[0]"),
        "{}",
        binder.detail
    );

    // The token identity's own reader (suffixed set) may not read the plain set: reported
    // missing, saying why.
    let user = cp.client(Identity::BreakglassUser).await?;
    let both = config(cp)?;
    let report = doctor(&user, &both, both.environment(USER_ENV).context("env")?).await?;
    let grant = report
        .items
        .iter()
        .find(|i| i.name == "ValidatingAdmissionPolicy tower-breakglass-grant")
        .context("grant item")?;
    assert_eq!(grant.status, ItemStatus::Missing);
    assert!(grant.detail.contains("forbidden"), "{}", grant.detail);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Kyverno (optional install): validated against Kyverno's published CRD schema.

const KYVERNO_CRD: &str =
    include_str!("../../../policies/kyverno/crds/policies.kyverno.io_imagevalidatingpolicies.yaml");
const KYVERNO_IMAGE_POLICY: &str = include_str!("../../../policies/kyverno/debug-image.yaml");
const KYVERNO_CLEANUP_RBAC: &str = include_str!("../../../policies/kyverno/cleanup-rbac.yaml");

fn docs(text: &str) -> anyhow::Result<Vec<Value>> {
    let all: Vec<Value> = serde_saphyr::from_multiple(text)?;
    Ok(all.into_iter().filter(|d| !d.is_null()).collect())
}

#[tokio::test]
async fn kyverno_manifests_validate_against_kyverno_crd_schemas() -> anyhow::Result<()> {
    let cp = ControlPlane::shared().await?;
    let admin = cp.client(Identity::Admin).await?;
    for crd in docs(KYVERNO_CRD)? {
        apply(&admin, &crd, false).await?;
    }
    let policy = docs(KYVERNO_IMAGE_POLICY)?
        .into_iter()
        .next()
        .context("the image policy")?;
    assert_eq!(policy["metadata"]["name"], "tower-breakglass-debug-image");
    // The CRD is served a moment after creation: retry the dry run until the kind is known.
    wait_until(
        "ImageValidatingPolicy accepted (server-side dry run)",
        WAIT,
        || async { Ok(Some(apply(&admin, &policy, true).await?)) },
    )
    .await?;
    // The validation is real: a field the schema does not have, or a value its enum refuses,
    // is an error.
    let unknown = with(policy.clone(), |p| {
        p["spec"]["attestors"][0]["cosign"]["keyless"]["issuer"] = json!("x");
    });
    let e = apply(&admin, &unknown, true)
        .await
        .err()
        .context("an unknown field was accepted")?;
    let e = format!("{e:#}");
    assert!(
        e.contains("field not declared in schema") || e.contains("unknown field"),
        "{e}"
    );
    let bad_enum = with(policy.clone(), |p| {
        p["spec"]["validationActions"] = json!(["Block"]);
    });
    let e = apply(&admin, &bad_enum, true)
        .await
        .err()
        .context("a bad enum value was accepted")?;
    assert!(format!("{e:#}").contains("Unsupported value"), "{e:#}");
    for object in docs(KYVERNO_CLEANUP_RBAC)? {
        apply(&admin, &object, true).await?;
    }
    Ok(())
}
