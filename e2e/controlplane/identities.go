package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// staticIdentity is one line of the API server's --token-auth-file.
type staticIdentity struct {
	User   string
	Groups []string
	Token  string
}

type identities struct {
	admin             staticIdentity // cluster-admin through system:masters
	breakglassUser    staticIdentity // the server's identity in the token-minted case; no rights
	alice, bob        staticIdentity // humans without rights
	controllerManager staticIdentity
	nodeSim           staticIdentity
}

func newIdentities() (*identities, error) {
	mk := func(user string, groups ...string) (staticIdentity, error) {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return staticIdentity{}, err
		}
		return staticIdentity{User: user, Groups: groups, Token: hex.EncodeToString(b)}, nil
	}
	var ids identities
	var err error
	for _, x := range []struct {
		dst    *staticIdentity
		user   string
		groups []string
	}{
		{&ids.admin, "admin", []string{"system:masters"}},
		{&ids.breakglassUser, "breakglass-server-user", nil},
		{&ids.alice, "alice", nil},
		{&ids.bob, "bob", nil},
		{&ids.controllerManager, "system:kube-controller-manager", []string{"system:masters"}},
		{&ids.nodeSim, "controlplane:node-simulator", []string{"system:masters"}},
	} {
		if *x.dst, err = mk(x.user, x.groups...); err != nil {
			return nil, err
		}
	}
	return &ids, nil
}

func (ids *identities) writeTokenFile(path string) error {
	var b strings.Builder
	for _, id := range []staticIdentity{ids.admin, ids.breakglassUser, ids.alice, ids.bob, ids.controllerManager, ids.nodeSim} {
		// token,user,uid,"group1,group2"
		fmt.Fprintf(&b, "%s,%s,%s,\"%s\"\n", id.Token, id.User, id.User, strings.Join(id.Groups, ","))
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

func (id staticIdentity) restConfig(server string, caPEM []byte) *rest.Config {
	c := tokenRestConfig(server, caPEM, id.Token)
	c.UserAgent = "controlplane/" + id.User
	return c
}

func tokenRestConfig(server string, caPEM []byte, token string) *rest.Config {
	return &rest.Config{
		Host:            server,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM},
		QPS:             200,
		Burst:           400,
	}
}

// writeKubeconfig writes a single-context kubeconfig (context and cluster
// named after the cluster) using a bearer token.
func writeKubeconfig(path, clusterName, server string, caPEM []byte, token, namespace string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[clusterName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[clusterName] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[clusterName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: clusterName, Namespace: namespace}
	cfg.CurrentContext = clusterName
	return clientcmd.WriteToFile(*cfg, path)
}
