package testcert

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIssuedCertificatesVerify(t *testing.T) {
	ca, other := NewCA(t, "ca"), NewCA(t, "other")
	for _, tc := range []struct {
		name   string
		server bool
		usage  x509.ExtKeyUsage
	}{
		{"server", true, x509.ExtKeyUsageServerAuth},
		{"client", false, x509.ExtKeyUsageClientAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaf := ca.Issue(t, "alice", tc.server)
			cert, err := x509.ParseCertificate(leaf.TLS.Certificate[0])
			require.NoError(t, err)
			require.Equal(t, "alice", cert.Subject.CommonName)
			opts := x509.VerifyOptions{Roots: ca.Pool, KeyUsages: []x509.ExtKeyUsage{tc.usage}}
			if tc.server {
				opts.DNSName = "127.0.0.1"
			}
			_, err = cert.Verify(opts)
			require.NoError(t, err)
			opts.Roots = other.Pool
			_, err = cert.Verify(opts)
			require.Error(t, err, "another CA does not vouch for it")

			pair, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
			require.NoError(t, err, "the PEM forms load as a key pair")
			require.Equal(t, leaf.TLS.Certificate, pair.Certificate)
		})
	}
	block, _ := pem.Decode(ca.PEM)
	require.NotNil(t, block)
	require.Equal(t, ca.Cert.Raw, block.Bytes)
}
