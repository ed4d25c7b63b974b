package ledger_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// skipEnv names the variable a developer without PostgreSQL sets to skip
// these tests. CI (CI=true) never skips: a missing PostgreSQL fails there,
// since .ci/run installs it (scripts/install-deps.sh).
const skipEnv = "WARREN_LEDGER_SKIP_WITHOUT_POSTGRES"

// pgBin finds the directory of Debian's PostgreSQL server binaries
// (initdb, pg_ctl): the newest /usr/lib/postgresql/N/bin, else PATH.
func pgBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	p, err := exec.LookPath("initdb")
	if err != nil {
		return "", fmt.Errorf("no PostgreSQL server binaries (initdb) in /usr/lib/postgresql/*/bin or PATH: apt-get install postgresql (scripts/install-deps.sh)")
	}
	return filepath.Dir(p), nil
}

// startPostgres starts a private PostgreSQL server for the test: initdb
// into a fresh data directory, pg_ctl start on a free port of 127.0.0.1
// (its socket in the data directory), stopped and removed by t.Cleanup.
// PostgreSQL refuses to run as root, so as root it runs as the user
// "postgres" that Debian's package creates.
func startPostgres(t *testing.T) *postgres {
	t.Helper()
	bin, err := pgBin()
	if err != nil {
		if os.Getenv("CI") != "true" && os.Getenv(skipEnv) != "" {
			t.Skipf("%v (skipped: %s is set)", err, skipEnv)
		}
		t.Fatalf("%v; outside CI, set %s=1 to skip", err, skipEnv)
	}
	var cred *syscall.Credential
	dir, err := os.MkdirTemp("", "ledger-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		require.NoError(t, err, "running as root, PostgreSQL needs the user postgres")
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		require.NoError(t, os.Chown(dir, uid, gid))
	}
	data := filepath.Join(dir, "data")
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", name, out)
	}
	run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	port := freePort(t)
	// A scratch database: no fsync, so the tests measure the broker and
	// the contract, not the disk. Crash safety of PostgreSQL is not what
	// is tested; its transactions are.
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off", port, dir)
	pg := &postgres{bin: bin, data: data, dir: dir, opts: opts, port: port, cred: cred}
	require.NoError(t, pg.ctl("start"))
	t.Cleanup(func() {
		if err := pg.ctl("stop", "-m", "immediate"); err != nil {
			t.Logf("%v", err)
		}
	})
	return pg
}

// postgres is a server startPostgres started.
type postgres struct {
	bin, data, dir, opts string
	port                 int
	cred                 *syscall.Credential
}

// ctl runs pg_ctl action, waiting for it to finish.
func (pg *postgres) ctl(action string, args ...string) error {
	args = append([]string{"-D", pg.data, "-l", filepath.Join(pg.dir, "log"), "-w", "-t", "60", "-o", pg.opts, action}, args...)
	cmd := exec.Command(filepath.Join(pg.bin, "pg_ctl"), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl %s: %v: %s", action, err, out)
	}
	return nil
}

// database creates a fresh database and returns a pool on it, closed by
// t.Cleanup.
func (pg *postgres) database(t *testing.T, name string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgxpool.New(ctx, pg.url("postgres"))
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.Exec(ctx, "create database "+name)
	require.NoError(t, err)
	pool, err := pgxpool.New(ctx, pg.url(name)+"&pool_max_conns=4")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, pool.Ping(ctx))
	return pool
}

func (pg *postgres) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", pg.port, db)
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
