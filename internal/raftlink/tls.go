package raftlink

import "crypto/tls"

// MutualTLS reports whether server requires and verifies a certificate of
// every client and client presents one: members then authenticate each
// other without a cluster secret.
func MutualTLS(server, client *tls.Config) bool {
	if server == nil || client == nil {
		return false
	}
	verified := server.ClientAuth == tls.RequireAndVerifyClientCert ||
		server.ClientAuth == tls.RequireAnyClientCert && (server.VerifyPeerCertificate != nil || server.VerifyConnection != nil) ||
		server.GetConfigForClient != nil
	return verified && (len(client.Certificates) > 0 || client.GetClientCertificate != nil)
}
