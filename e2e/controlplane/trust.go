package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// trustSource is another (home) instance whose service-account issuer this
// instance trusts, read from that instance's kubeconfig dir.
type trustSource struct {
	dir   string
	info  readyInfo
	caPEM []byte
}

func loadTrustSource(dir string) (*trustSource, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "controlplane.json"))
	if err != nil {
		return nil, fmt.Errorf("--trust-issuer-dir: %w (is the home instance ready?)", err)
	}
	t := &trustSource{dir: dir}
	if err := json.Unmarshal(raw, &t.info); err != nil {
		return nil, fmt.Errorf("--trust-issuer-dir: controlplane.json: %w", err)
	}
	if t.caPEM, err = os.ReadFile(filepath.Join(dir, "ca.crt")); err != nil {
		return nil, fmt.Errorf("--trust-issuer-dir: %w", err)
	}
	return t, nil
}

func (t *trustSource) usernamePrefix() string {
	return "hangar:" + t.info.ClusterName + ":"
}

// writeAuthenticationConfig writes a structured authentication configuration
// with one JWT authenticator for the home instance's issuer: tokens must be
// service-account tokens with this cluster's name as audience, and map to
// User `hangar:<home cluster>:<service account name>`. The authenticator
// reads the issuer's discovery document and JWKS from the home API server
// (anonymously readable there).
func (t *trustSource) writeAuthenticationConfig(path, audience string) error {
	cfg := map[string]any{
		"apiVersion": "apiserver.config.k8s.io/v1",
		"kind":       "AuthenticationConfiguration",
		"jwt": []any{map[string]any{
			"issuer": map[string]any{
				"url":                  t.info.Issuer,
				"audiences":            []string{audience},
				"audienceMatchPolicy":  "MatchAny",
				"certificateAuthority": string(t.caPEM),
			},
			"claimValidationRules": []any{map[string]any{
				"expression": "claims.sub.startsWith('system:serviceaccount:')",
				"message":    "only service-account tokens of the home cluster are trusted",
			}},
			"claimMappings": map[string]any{
				"username": map[string]any{
					"expression": fmt.Sprintf("'%s' + claims.sub.split(':')[3]", t.usernamePrefix()),
				},
			},
		}},
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// probe mints a token for breakglass/tower-actor in the home instance and
// waits until this instance authenticates it (the JWT authenticator loads
// the issuer's keys asynchronously).
func (t *trustSource) probe(ctx context.Context, self *kubernetesTarget, audience string) error {
	home, err := clientcmd.BuildConfigFromFlags("", t.info.Kubeconfigs["admin"])
	if err != nil {
		return err
	}
	homeClient, err := kubernetes.NewForConfig(home)
	if err != nil {
		return err
	}
	want := t.usernamePrefix() + "tower-actor"
	var last string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		exp := int64(600)
		tr, err := homeClient.CoreV1().ServiceAccounts("breakglass").CreateToken(ctx, "tower-actor", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &exp},
		}, metav1.CreateOptions{})
		if err != nil {
			last = "token request in home cluster: " + err.Error()
			return false, nil
		}
		c, err := kubernetes.NewForConfig(tokenRestConfig(self.server, self.caPEM, tr.Status.Token))
		if err != nil {
			return false, err
		}
		r, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			last = "self subject review: " + err.Error()
			return false, nil
		}
		if r.Status.UserInfo.Username != want {
			return false, fmt.Errorf("trusted token authenticated as %q, want %q", r.Status.UserInfo.Username, want)
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("issuer trust probe: %w (last: %s)", err, last)
	}
	return nil
}

// kubernetesTarget is an API server address with its CA.
type kubernetesTarget struct {
	server string
	caPEM  []byte
}
