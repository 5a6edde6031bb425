//! What an identity may do, asked of the API server itself (`SelfSubjectAccessReview`), so a
//! test checks the rights RBAC really grants rather than the manifests it was given.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

/// Whether `client` may `verb` `resource` (with subresource `sub`, empty for none) in
/// `namespace`. Role bindings are in the RBAC group; everything else asked here is core.
pub async fn can(
    client: &Client,
    namespace: &str,
    verb: &str,
    resource: &str,
    sub: &str,
) -> anyhow::Result<bool> {
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.into()),
                verb: Some(verb.into()),
                group: Some(if resource.contains("rolebinding") {
                    "rbac.authorization.k8s.io".into()
                } else {
                    String::new()
                }),
                resource: Some(resource.into()),
                subresource: (!sub.is_empty()).then(|| sub.to_string()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let r = reviews.create(&PostParams::default(), &review).await?;
    Ok(r.status.is_some_and(|s| s.allowed))
}

/// What a break-glass server must never be able to do to pods in a namespace where it holds
/// no grant: change, create or delete them, add debug containers, attach or exec.
pub const POD_WRITES: [(&str, &str, &str); 8] = [
    ("patch", "pods", ""),
    ("update", "pods", ""),
    ("create", "pods", ""),
    ("delete", "pods", ""),
    ("patch", "pods", "ephemeralcontainers"),
    ("update", "pods", "ephemeralcontainers"),
    ("create", "pods", "attach"),
    ("create", "pods", "exec"),
];

/// The entries of [`POD_WRITES`] `client` may do in `namespace` (empty at rest).
pub async fn pod_writes_allowed(client: &Client, namespace: &str) -> anyhow::Result<Vec<String>> {
    let mut allowed = Vec::new();
    for (verb, resource, sub) in POD_WRITES {
        if can(client, namespace, verb, resource, sub).await? {
            allowed.push(format!("{verb} {resource}/{sub}"));
        }
    }
    Ok(allowed)
}
