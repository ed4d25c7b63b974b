// Package console is Warren's web console: a single page of plain HTML,
// CSS and JavaScript (no build step, no CDN, embedded with go:embed, so it
// works offline) that reads and changes the broker through the management
// API under /api/, as RabbitMQ's management UI does.
//
// Handler wraps the management API's handler: it serves the console at
// "/" and its assets under "/console/", and passes everything else,
// /api/ included, to the API unchanged. The root package's
// Broker.ManagementHandler returns that wrapped handler, so an embedder
// mounting it at "/" (or under a prefix with http.StripPrefix; every URL
// the page uses is relative) gets both.
//
// What it promises:
//
//   - Logins are the broker's users: the page sends HTTP basic
//     credentials with every API call and keeps them in the tab's
//     sessionStorage (gone when the tab closes, or on Log out). It honours
//     tags only through the API: a page the API answers 401 or 403 for
//     shows "access refused" and nothing else, so a non-administrator
//     sees no users, permissions or vhosts administration.
//   - API calls from the page carry X-Requested-With: XMLHttpRequest; for
//     those, Handler drops the API's WWW-Authenticate header from a 401,
//     so that a browser shows the page's own login form instead of its
//     basic-auth prompt (RabbitMQ's UI does the same). Other clients see
//     the API exactly as before.
//   - The page polls the API (every 5 s by default, adjustable, paused
//     while the tab is hidden) and updates numbers in place; lists are
//     fetched a page at a time (the API's page/page_size/name/sort), so
//     10,000 queues cost one page of queue lookups per refresh.
//   - Charts draw the API's rate history (the *_details samples asked
//     for with msg_rates_age/lengths_age) and say "no data yet" while
//     there are fewer than two samples.
//   - Elements tests drive carry stable data-testid attributes
//     (docs/console.md lists them), every control is reachable with the
//     keyboard (plus shortcuts: g then o/q/e/c/h/v/u/p/l/i/d to go to a
//     page, / to filter, r to refresh, ? for help), and the layout works
//     from a phone's width up.
//   - Every change the page asks for is a fetch with an application/json
//     body from the API's own origin, the only kind the API accepts from
//     a browser (internal/mgmt csrf.go): a page of another site cannot
//     make one with the browser's saved credentials. A definitions file
//     is sent as the JSON it is, not as a form upload.
//   - Move messages on a queue's page stores the shovel RabbitMQ's UI
//     stores (a shovel parameter with src-delete-after queue-length) and
//     reports what GET /api/shovels reports while it runs; the shovels and
//     federation pages show the API's link status and change links only
//     through the API's own routes.
//   - Assets are served with a content hash ETag, Cache-Control no-cache
//     and a Content-Security-Policy that allows only the console's own
//     scripts and styles (no inline script, no other origin).
//
// Handler is safe for concurrent use; it keeps no state but the embedded
// files.
package console
