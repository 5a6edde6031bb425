package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds every key and certificate of one control plane instance. All of
// them are generated at start; nothing is reused between runs.
type pki struct {
	dir string

	caCert *x509.Certificate
	caKey  crypto.Signer

	// Files (PEM) written under dir.
	CACertFile           string
	ServingCertFile      string
	ServingKeyFile       string
	KubeletServingCert   string
	KubeletServingKey    string
	KubeletClientCert    string
	KubeletClientKey     string
	ServiceAccountKey    string // private, RSA, signs service-account tokens
	ServiceAccountPubKey string // public half, verifies them
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir}

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "breakglass-test-controlplane-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	p.caCert, err = x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p.caKey = caKey
	p.CACertFile = filepath.Join(dir, "ca.crt")
	if err := writePEM(p.CACertFile, "CERTIFICATE", caDER, 0o644); err != nil {
		return nil, err
	}

	loopbackIPs := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.96.0.1")}
	apiNames := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}

	if p.ServingCertFile, p.ServingKeyFile, err = p.issue("apiserver", "kube-apiserver", nil, apiNames, loopbackIPs, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if p.KubeletServingCert, p.KubeletServingKey, err = p.issue("kubelet-serving", "system:node:"+nodeName, []string{"system:nodes"}, []string{"localhost", nodeName}, []net.IP{net.ParseIP("127.0.0.1")}, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if p.KubeletClientCert, p.KubeletClientKey, err = p.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	p.ServiceAccountKey = filepath.Join(dir, "sa.key")
	if err := writePEM(p.ServiceAccountKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey), 0o600); err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	p.ServiceAccountPubKey = filepath.Join(dir, "sa.pub")
	if err := writePEM(p.ServiceAccountPubKey, "PUBLIC KEY", pubDER, 0o644); err != nil {
		return nil, err
	}
	return p, nil
}

// issue signs a leaf certificate with the instance CA and writes
// <name>.crt / <name>.key.
func (p *pki) issue(name, cn string, orgs, dnsNames []string, ips []net.IP, usage x509.ExtKeyUsage) (string, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		BasicConstraintsValid: true,
		DNSNames:              dnsNames,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile := filepath.Join(p.dir, name+".crt")
	keyFile := filepath.Join(p.dir, name+".key")
	if err := writePEM(certFile, "CERTIFICATE", der, 0o644); err != nil {
		return "", "", err
	}
	if err := writePEM(keyFile, "EC PRIVATE KEY", keyDER, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(fmt.Sprintf("random serial: %v", err))
	}
	return n.Add(n, big.NewInt(1))
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}
