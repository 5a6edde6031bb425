//! How the server reaches each environment's cluster: the pod's own service account, a
//! kubeconfig context, or a short-lived token minted per step from the home cluster's
//! TokenRequest API (no static credential for the target cluster exists anywhere).

use std::path::PathBuf;

use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};

use crate::config::ClusterCredentials;
use crate::ports::ClusterError;

/// Lifetime asked for minted tokens: long enough for one step, short enough to be worthless
/// soon after. The API server may raise it to its minimum (10 minutes).
const MINTED_TOKEN_SECONDS: i64 = 600;

/// Builds a client for `env` from `creds`. For a minted token, `home` is a client of the home
/// cluster, used to mint.
pub async fn client_for(
    env: &str,
    creds: &ClusterCredentials,
    home: Option<Client>,
) -> Result<Client, ClusterError> {
    let config = match creds {
        ClusterCredentials::InCluster => kube::Config::incluster()
            .map_err(|e| ClusterError::config_from(env, "in-cluster credentials unavailable", e))?,
        ClusterCredentials::Kubeconfig { path, context } => {
            let kc = Kubeconfig::read_from(path).map_err(|e| {
                ClusterError::config_from(
                    env,
                    format!("cannot read kubeconfig {}", path.display()),
                    e,
                )
            })?;
            let opts = KubeConfigOptions {
                context: context.clone(),
                ..Default::default()
            };
            kube::Config::from_custom_kubeconfig(kc, &opts)
                .await
                .map_err(|e| {
                    ClusterError::config_from(env, format!("kubeconfig {}", path.display()), e)
                })?
        }
        ClusterCredentials::MintedToken {
            home: home_env,
            namespace,
            service_account,
            audience,
            server,
            ca_file,
        } => {
            let home = home.ok_or_else(|| {
                ClusterError::config(
                    env,
                    format!("home environment `{home_env}` has no usable credentials"),
                )
            })?;
            let token = mint(env, home, namespace, service_account, audience).await?;
            let url = server
                .parse()
                .map_err(|e| ClusterError::config_from(env, format!("server URL `{server}`"), e))?;
            let mut c = kube::Config::new(url);
            c.root_cert_file = ca_file.as_ref().map(PathBuf::from);
            c.auth_info.token = Some(token.into());
            c
        }
    };
    Client::try_from(config).map_err(|e| ClusterError::config_from(env, "cannot build a client", e))
}

async fn mint(
    env: &str,
    home: Client,
    namespace: &str,
    service_account: &str,
    audience: &str,
) -> Result<String, ClusterError> {
    let api: Api<ServiceAccount> = Api::namespaced(home, namespace);
    let req = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![audience.to_string()],
            expiration_seconds: Some(MINTED_TOKEN_SECONDS),
            bound_object_ref: None,
        },
        ..Default::default()
    };
    let tr = api
        .create_token_request(service_account, &PostParams::default(), &req)
        .await
        .map_err(|e| ClusterError::from_kube(env, "mint a token for it in the home cluster", e))?;
    tr.status
        .map(|s| s.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ClusterError::config(env, "the home cluster returned an empty token"))
}

/// Who the server is on a cluster, by SelfSubjectReview.
pub async fn whoami(env: &str, client: Client) -> Result<String, ClusterError> {
    let api: Api<SelfSubjectReview> = Api::all(client);
    let r = api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .map_err(|e| {
            ClusterError::from_kube(env, "learn the server's identity (SelfSubjectReview)", e)
        })?;
    r.status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .filter(|u| !u.is_empty())
        .ok_or_else(|| ClusterError::config(env, "SelfSubjectReview returned no username"))
}
