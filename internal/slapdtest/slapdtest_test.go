package slapdtest

import (
	"crypto/tls"
	"net"
	"testing"

	"github.com/go-ldap/ldap/v3"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStart: the loaded entry binds with its password over plain LDAP,
// StartTLS and LDAPS (verified against the Server's CA); a wrong password
// is invalid credentials; Restart serves the same data on the same port;
// after Stop the port refuses connections.
func TestStart(t *testing.T) {
	s := Start(t, `dn: cn=alice,`+Suffix+`
objectClass: inetOrgPerson
cn: alice
sn: A
userPassword: alicepw
`)
	tlsCfg := &tls.Config{RootCAs: s.CA.Pool, ServerName: s.Host}
	dial := map[string]func() (*ldap.Conn, error){
		"plain": func() (*ldap.Conn, error) { return ldap.DialURL("ldap://" + s.Addr()) },
		"starttls": func() (*ldap.Conn, error) {
			c, err := ldap.DialURL("ldap://" + s.Addr())
			if err != nil {
				return nil, err
			}
			if err := c.StartTLS(tlsCfg); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		},
		"ldaps": func() (*ldap.Conn, error) {
			return ldap.DialURL("ldaps://"+s.TLSAddr(), ldap.DialWithTLSConfig(tlsCfg))
		},
	}
	for name, d := range dial {
		t.Run(name, func(t *testing.T) {
			c, err := d()
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.Bind("cn=alice,"+Suffix, "alicepw"))
			err = c.Bind("cn=alice,"+Suffix, "wrong")
			require.True(t, ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials), "%v", err)
			require.NoError(t, c.Bind(RootDN, RootPass))
		})
	}
	s.Restart(t)
	c, err := ldap.DialURL("ldap://" + s.Addr())
	require.NoError(t, err)
	require.NoError(t, c.Bind("cn=alice,"+Suffix, "alicepw"), "same port, same data after Restart")
	require.NoError(t, c.Close())
	s.Stop()
	_, err = net.Dial("tcp", s.Addr())
	require.Error(t, err)
}
