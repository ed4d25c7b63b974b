package mgmt

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/warrenmq/broker/internal/rates"
)

// Listings' sorting, filtering and pagination, as RabbitMQ 4.x's
// rabbit_mgmt_util does them (pagination_params, sort_list,
// filter_and_paginate; copied from RabbitMQ 4.1):
//
//   - page (an integer > 0) asks for one page; without it the answer is the
//     plain list, however many items (page_size and name alone do
//     nothing). page_size defaults to 100 and may be 1 to 500.
//   - A page or page_size that is not an integer is 400 bad_request
//     "Pagination parameters are invalid"; one out of its range is 400
//     invalid_pagination_parameters "Invalid pagination parameters: page
//     number P, page size S" (S "undefined" when not given); a page past
//     the last (one that would start after the last item) is 400
//     page_out_of_range "Page out of range, page: P page size: S, len: N".
//   - name filters a page request by the item's name: a case-insensitive
//     substring, or with use_regex=true a case-insensitive regular
//     expression (Go's syntax, not PCRE's; one that does not compile is
//     "Pagination parameters are invalid").
//   - sort names a field, dotted for a nested one
//     ("message_stats.publish_details.rate"); items sort by it, then by
//     vhost and name, and a missing value counts as 0 (numbers sort before
//     booleans, booleans before strings, as Erlang orders terms).
//     sort_reverse=true reverses the whole order. sort applies with or
//     without page.
//
// A paged answer is RabbitMQ's object {"filtered_count", "item_count",
// "items", "page", "page_count", "page_size", "total_count"}.

// Pagination bounds, rabbit_mgmt_util's ?DEFAULT_PAGE_SIZE and
// ?MAX_PAGE_SIZE.
const (
	defaultPageSize = 100
	maxPageSize     = 500
)

// listQuery is a listing request's sorting, filtering and pagination.
type listQuery struct {
	// page is 0 when no page was asked for.
	page, pageSize int
	// match filters a page request by name; nil matches everything.
	match func(name string) bool
	// sort is the field to sort by first ("" for vhost, name).
	sort    string
	reverse bool
}

// paged reports whether the request asked for a page.
func (q listQuery) paged() bool { return q.page > 0 }

// byName reports whether the order is by vhost and name only, so that a
// listing can be paged before its items are built.
func (q listQuery) byName() bool { return q.sort == "" || q.sort == "vhost" || q.sort == "name" }

// sortKeys is RabbitMQ's merge_sorts: the requested field, then vhost
// and name, each once.
func (q listQuery) sortKeys() []string {
	keys := []string{"vhost", "name"}
	if q.sort != "" {
		keys = slices.DeleteFunc(keys, func(k string) bool { return k == q.sort })
		keys = append([]string{q.sort}, keys...)
	}
	return keys
}

// errPaginationInvalid is RabbitMQ's reason for a page number, page size
// or name pattern that does not parse.
const errPaginationInvalid = "Pagination parameters are invalid"

// parseListQuery reads the request's sorting, filtering and pagination
// parameters, or answers 400 as RabbitMQ does and returns false.
func parseListQuery(c *mgmtCall) (listQuery, bool) {
	qs := c.r.URL.Query()
	var q listQuery
	page, pageOK, err := queryInt(qs.Get("page"), qs.Has("page"))
	if err != nil {
		WriteError(c.w, http.StatusBadRequest, "bad_request", errPaginationInvalid)
		return q, false
	}
	size, sizeOK, err := queryInt(qs.Get("page_size"), qs.Has("page_size"))
	if err != nil {
		WriteError(c.w, http.StatusBadRequest, "bad_request", errPaginationInvalid)
		return q, false
	}
	q.sort = qs.Get("sort")
	q.reverse = qs.Get("sort_reverse") == "true"
	if !pageOK {
		return q, true
	}
	if !sizeOK && page > 0 {
		size, sizeOK = defaultPageSize, true
	}
	if page <= 0 || !sizeOK || size <= 0 || size > maxPageSize {
		sizeText := "undefined"
		if sizeOK {
			sizeText = strconv.Itoa(size)
		}
		WriteError(c.w, http.StatusBadRequest, "invalid_pagination_parameters",
			fmt.Sprintf("Invalid pagination parameters: page number %d, page size %s", page, sizeText))
		return q, false
	}
	q.page, q.pageSize = page, size
	if name := qs.Get("name"); name != "" {
		if qs.Get("use_regex") == "true" {
			re, err := regexp.Compile("(?i)" + name)
			if err != nil {
				WriteError(c.w, http.StatusBadRequest, "bad_request", errPaginationInvalid)
				return q, false
			}
			q.match = re.MatchString
		} else {
			lower := strings.ToLower(name)
			q.match = func(s string) bool { return strings.Contains(strings.ToLower(s), lower) }
		}
	}
	return q, true
}

// queryInt parses a query parameter as Erlang's list_to_integer does (an
// optional sign and decimal digits); ok is false when it is absent.
func queryInt(s string, present bool) (n int, ok bool, err error) {
	if !present {
		return 0, false, nil
	}
	n, err = strconv.Atoi(s)
	if err != nil {
		return 0, false, err
	}
	return n, true, nil
}

// window is the slice of n filtered items the query's page covers, or an
// answered 400 page_out_of_range and false (rabbit_mgmt_util's
// range_filter: a page may start just past the last item, and is then
// empty).
func (q listQuery) window(w http.ResponseWriter, n int) (lo, hi int, ok bool) {
	// (page-1)*size > n, compared without multiplying: a huge page must
	// not overflow into a small offset.
	if q.page-1 > n/q.pageSize {
		WriteError(w, http.StatusBadRequest, "page_out_of_range",
			fmt.Sprintf("Page out of range, page: %d page size: %d, len: %d", q.page, q.pageSize, n))
		return 0, 0, false
	}
	lo = (q.page - 1) * q.pageSize
	return lo, min(lo+q.pageSize, n), true
}

// pageJSON is RabbitMQ's paged listing.
type pageJSON[T any] struct {
	FilteredCount int `json:"filtered_count"`
	ItemCount     int `json:"item_count"`
	Items         []T `json:"items"`
	Page          int `json:"page"`
	PageCount     int `json:"page_count"`
	PageSize      int `json:"page_size"`
	TotalCount    int `json:"total_count"`
}

// writePage answers with items, the page of filtered items of total.
func writePage[T any](c *mgmtCall, q listQuery, items []T, filtered, total int) {
	if items == nil {
		items = []T{}
	}
	writeJSON(c.w, http.StatusOK, pageJSON[T]{
		FilteredCount: filtered, ItemCount: len(items), Items: items, Page: q.page,
		PageCount: (filtered + q.pageSize - 1) / q.pageSize, PageSize: q.pageSize, TotalCount: total,
	})
}

// writeListQuery answers a listing as the query asks: the plain list when
// it asks for neither a page nor an order (exactly as before), else the
// items sorted on their JSON fields, filtered and paged.
func writeListQuery[T any](c *mgmtCall, q listQuery, items []T) {
	if !q.paged() && q.sort == "" {
		writeList(c.w, items, nil)
		return
	}
	if writeKeyedListQuery(c, q, items) {
		return
	}
	objs, err := jsonObjects(items)
	if err != nil {
		WriteError(c.w, http.StatusInternalServerError, "internal_server_error", err.Error())
		return
	}
	keys := q.sortKeys()
	slices.SortStableFunc(objs, func(a, b map[string]any) int {
		for _, k := range keys {
			if r := compareTerms(dotted(a, k), dotted(b, k)); r != 0 {
				return r
			}
		}
		return 0
	})
	if q.reverse {
		slices.Reverse(objs)
	}
	if !q.paged() {
		writeList(c.w, objs, nil)
		return
	}
	total := len(objs)
	if q.match != nil {
		objs = slices.DeleteFunc(objs, func(o map[string]any) bool {
			name, _ := o["name"].(string)
			return !q.match(name)
		})
	}
	lo, hi, ok := q.window(c.w, len(objs))
	if !ok {
		return
	}
	writePage(c, q, objs[lo:hi], len(objs), total)
}

// keyed is a listing item that gives the values of the sort keys it
// knows (as JSON would decode them: a number as float64, string, bool or
// nil)
// without a JSON round trip; ok is false for a key it does not know.
type keyed interface {
	sortValue(key string) (v any, ok bool)
}

// writeKeyedListQuery is writeListQuery for items that know every sort key
// the query needs (keyed): sorted, filtered and paged as they are, so that
// sorting 10,000 queues by depth or by a rate encodes only the page. It reports false,
// having written nothing, when the items do not know a key.
func writeKeyedListQuery[T any](c *mgmtCall, q listQuery, items []T) bool {
	keys := q.sortKeys()
	var zero T
	kz, ok := any(zero).(keyed)
	if !ok {
		return false
	}
	for _, k := range keys {
		if _, ok := kz.sortValue(k); !ok {
			return false
		}
	}
	value := func(it T, k string) any { v, _ := any(it).(keyed).sortValue(k); return v }
	// Each item's key values once, not once per comparison.
	type row struct {
		item T
		vals []any
	}
	rows := make([]row, len(items))
	for i, it := range items {
		vals := make([]any, len(keys))
		for j, k := range keys {
			vals[j] = value(it, k)
		}
		rows[i] = row{it, vals}
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		for j := range keys {
			if r := compareTerms(a.vals[j], b.vals[j]); r != 0 {
				return r
			}
		}
		return 0
	})
	for i := range rows {
		items[i] = rows[i].item
	}
	if q.reverse {
		slices.Reverse(items)
	}
	if !q.paged() {
		writeList(c.w, items, nil)
		return true
	}
	total := len(items)
	if q.match != nil {
		items = slices.DeleteFunc(items, func(it T) bool {
			name, _ := value(it, "name").(string)
			return !q.match(name)
		})
	}
	lo, hi, ok := q.window(c.w, len(items))
	if !ok {
		return true
	}
	writePage(c, q, items[lo:hi], len(items), total)
	return true
}

// sortValue gives a queue's top-level fields, its lengths' rates and its
// message_stats counters and rates for sorting (keyed).
func (q queueJSON) sortValue(key string) (any, bool) {
	num := func(n uint64) any { return float64(n) }
	switch key {
	case "name":
		return q.Name, true
	case "vhost":
		return q.VHost, true
	case "type":
		return q.Type, true
	case "state":
		return q.State, true
	case "node":
		return q.Node, true
	case "durable":
		return q.Durable, true
	case "auto_delete":
		return q.AutoDelete, true
	case "exclusive":
		return q.Exclusive, true
	case "messages":
		return num(q.Messages), true
	case "messages_ready":
		return num(q.MessagesReady), true
	case "messages_unacknowledged":
		return num(q.MessagesUnacknowledged), true
	case "consumers":
		return num(uint64(q.Consumers)), true
	case "memory":
		return num(q.Memory), true
	case "policy":
		if q.Policy == nil {
			return nil, true
		}
		return *q.Policy, true
	case "messages_details.rate":
		return detailsRate(q.MessagesDetails), true
	case "messages_ready_details.rate":
		return detailsRate(q.MessagesReadyDetails), true
	case "messages_unacknowledged_details.rate":
		return detailsRate(q.MessagesUnacknowledgedDetails), true
	}
	if stat, ok := strings.CutPrefix(key, "message_stats."); ok {
		return statSortValue(q.MessageStats, stat)
	}
	return nil, false
}

// detailsRate is a details object's rate for sorting; a queue without a
// history has no details, and a missing value sorts as 0 (dotted).
func detailsRate(d *rates.Details) any {
	if d == nil {
		return float64(0)
	}
	return d.Rate
}

// statSortValue gives a message_stats counter ("publish") or its rate
// ("publish_details.rate") for sorting, from the object messageStats
// builds (counters uint64, details rates.Details), so that sorting by a
// rate skips the JSON round trip as sorting by a count does. Whether it
// knows a key depends on the key's shape only, never on the values (a
// zero queue is asked first). A missing value is 0, as in dotted.
func statSortValue(stats map[string]any, stat string) (any, bool) {
	name, field, hasField := strings.Cut(stat, ".")
	if hasField {
		if field != "rate" || !strings.HasSuffix(name, "_details") {
			return nil, false
		}
		d, ok := stats[name].(rates.Details)
		if !ok {
			return float64(0), true
		}
		return d.Rate, true
	}
	if strings.HasSuffix(name, "_details") {
		return nil, false // an object: left to the JSON path
	}
	n, ok := stats[name].(uint64)
	if !ok {
		return float64(0), true
	}
	return float64(n), true
}

// jsonObjects is items as their JSON objects, numbers kept exact
// (json.Number) so that they encode again as they were.
func jsonObjects[T any](items []T) ([]map[string]any, error) {
	enc, err := json.Marshal(items)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(enc))
	dec.UseNumber()
	var out []map[string]any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// dotted is the value at a dotted path in o; a missing one is 0, as
// rabbit_mgmt_util's get_dotted_value has it.
func dotted(o map[string]any, path string) any {
	var v any = o
	for k := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return json.Number("0")
		}
		if v, ok = m[k]; !ok {
			return json.Number("0")
		}
	}
	return v
}

// termRank orders JSON kinds as Erlang orders the terms RabbitMQ sorts:
// numbers, then atoms (null, booleans), then objects and lists, then
// binaries (strings).
func termRank(v any) int {
	switch v.(type) {
	case json.Number, float64:
		return 0
	case nil, bool:
		return 1
	case map[string]any:
		return 2
	case []any:
		return 3
	default:
		return 4
	}
}

// compareTerms compares two JSON values in Erlang's term order (within a
// kind: numbers by value, atoms (false, null, true) and strings
// bytewise; objects and lists
// are equal to each other).
func compareTerms(a, b any) int {
	if r := cmp.Compare(termRank(a), termRank(b)); r != 0 {
		return r
	}
	switch x := a.(type) {
	case json.Number:
		return cmp.Compare(number(x), number(b))
	case float64:
		return cmp.Compare(x, number(b))
	case bool, nil:
		return strings.Compare(atom(a), atom(b))
	case string:
		return strings.Compare(x, b.(string))
	}
	return 0
}

// atom is the Erlang atom a JSON null or boolean is.
func atom(v any) string {
	if b, ok := v.(bool); ok {
		return strconv.FormatBool(b)
	}
	return "null"
}

// number is a JSON number's value.
func number(v any) float64 {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case float64:
		return x
	}
	return 0
}

// queuesPage answers a page request for queues ordered by vhost and name:
// it filters and pages the queues' names (which asks no queue) and asks
// only the queues on the page for their counts, so that a console
// showing 100 of 10,000 queues costs 100 queue lookups.
func (m *mgmt) queuesPage(c *mgmtCall, vhs []string, q listQuery, rq rateQueries) {
	type ref struct{ vhost, name string }
	var all []ref
	for _, vh := range vhs {
		for _, name := range m.b.QueueNames(vh) {
			all = append(all, ref{vh, name})
		}
	}
	total := len(all)
	if q.match != nil {
		all = slices.DeleteFunc(all, func(r ref) bool { return !q.match(r.name) })
	}
	byVHost := func(a, b ref) int { return cmp.Or(strings.Compare(a.vhost, b.vhost), strings.Compare(a.name, b.name)) }
	if q.sort == "name" {
		slices.SortFunc(all, func(a, b ref) int { return cmp.Or(strings.Compare(a.name, b.name), byVHost(a, b)) })
	} else {
		slices.SortFunc(all, byVHost)
	}
	if q.reverse {
		slices.Reverse(all)
	}
	lo, hi, ok := q.window(c.w, len(all))
	if !ok {
		return
	}
	items := make([]queueJSON, 0, hi-lo)
	for _, r := range all[lo:hi] {
		// A queue deleted since its name was listed is left out, as
		// Queues leaves it out.
		if qu, ok := m.b.Queue(c.r.Context(), r.vhost, r.name); ok {
			items = append(items, m.queueOf(qu, rq))
		}
	}
	m.setExclusiveTags(items)
	writePage(c, q, items, len(all), total)
}

// setExclusiveTags fills in each queue's exclusive consumer's tag, which
// the channels know.
func (m *mgmt) setExclusiveTags(qs []queueJSON) {
	excl := m.exclusiveConsumers()
	for i := range qs {
		if tag, ok := excl[[2]string{qs[i].VHost, qs[i].Name}]; ok {
			qs[i].ExclusiveConsumerTag = &tag
		}
	}
}
