package routing

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Exchange is an exchange as routing sees it. Durability, auto-delete and
// the declaration's arguments are the broker's business and live in its
// metadata; AlternateExchange is the "alternate-exchange" argument (or
// policy) the broker extracted.
type Exchange struct {
	Name string
	Kind Kind
	// Internal exchanges refuse basic.publish (the broker checks it, 403)
	// but are reachable through exchange-to-exchange bindings and as an
	// alternate exchange.
	Internal bool
	// AlternateExchange names the exchange that gets messages this one
	// routes nowhere; "" for none. It may name an exchange that does not
	// exist (yet): that is ignored at routing time, as in RabbitMQ.
	AlternateExchange string
	// HashOn is what a ConsistentHash exchange hashes instead of the
	// routing key (ParseHashArgs reads it from the exchange's arguments);
	// other kinds ignore it.
	HashOn HashOn
}

// Destination is the target of a binding: a queue, or an exchange when
// Exchange is set.
type Destination struct {
	Name     string
	Exchange bool
}

// Binding routes messages from the Source exchange to Destination. Key is
// the routing or binding key (ignored by fanout and headers exchanges) and
// Args the binding arguments (x-match and the matched values for headers
// exchanges). A binding's identity is all four fields, Args compared by
// type and value: bindings that differ only in Args are distinct.
type Binding struct {
	Source      string
	Destination Destination
	Key         string
	Args        map[string]any
}

// bindingID is a binding's identity in comparable form.
type bindingID struct {
	source string
	dest   destKey
	key    string
	args   string // argsIdentity(Args)
}

func idOf(b *Binding) (bindingID, error) {
	args, err := argsIdentity(b.Args)
	return bindingID{
		source: b.Source,
		dest:   destKey{name: b.Destination.Name, exchange: b.Destination.Exchange},
		key:    b.Key,
		args:   args,
	}, err
}

type binding struct {
	Binding
	id    bindingID
	destX *exchange       // the destination exchange, for exchange destinations
	hm    *headersMatcher // compiled Args when the source is a headers exchange
}

type exchange struct {
	Exchange
	isDefault bool

	out map[*binding]struct{} // bindings with this exchange as source
	in  map[*binding]struct{} // bindings with this exchange as destination
	// The peaks of out, in and direct: each is rebuilt once deletes left
	// it a quarter of its largest size (shrinkMap), so a burst of
	// bindings does not keep its table for good.
	outPeak, inPeak, directPeak peak

	// The routing index, by Kind: only the one matching Kind is in use.
	direct  map[string]*destList
	fanout  destList
	topic   *topicNode
	headers []*binding
	ring    hashRing
	modulus modulusSlots
	random  destList // LocalRandom: the bound queues (local_random.go)
}

type queue struct {
	in map[*binding]struct{} // bindings with this queue as destination
}

// Table is one vhost's exchanges, queue names and bindings, and routes
// messages through them. See the package documentation for the locking
// contract. The zero Table is an empty table, like NewTable's.
type Table struct {
	exchanges map[string]*exchange
	queues    map[string]*queue
	bindings  map[bindingID]*binding
	// The peaks of queues and bindings (shrinkMap): a burst of queues
	// declared and deleted would otherwise keep both tables for good.
	queuesPeak, bindingsPeak peak
}

// NewTable returns an empty table: no exchanges, not even the default one
// (DeclareDefaults adds those).
func NewTable() *Table {
	t := &Table{}
	t.lazyInit()
	return t
}

// lazyInit makes the zero Table usable; every mutation calls it first.
// Reads need no initialisation: a nil map reads as empty.
func (t *Table) lazyInit() {
	if t.exchanges == nil {
		t.exchanges = make(map[string]*exchange)
		t.queues = make(map[string]*queue)
		t.bindings = make(map[bindingID]*binding)
	}
}

// DeclareDefaults adds the default exchange "" and the Predeclared amq.*
// exchanges that are missing; it leaves existing ones as they are. Call it
// on a fresh table when a vhost is created.
func (t *Table) DeclareDefaults() {
	t.lazyInit()
	if _, ok := t.exchanges[""]; !ok {
		x := newExchange(Exchange{Name: "", Kind: Direct})
		x.isDefault = true
		t.exchanges[""] = x
	}
	for _, e := range Predeclared() {
		if _, ok := t.exchanges[e.Name]; !ok {
			t.exchanges[e.Name] = newExchange(e)
		}
	}
}

func newExchange(e Exchange) *exchange {
	x := &exchange{
		Exchange: e,
		out:      make(map[*binding]struct{}),
		in:       make(map[*binding]struct{}),
	}
	x.resetIndex()
	return x
}

func (x *exchange) resetIndex() {
	x.direct, x.fanout, x.topic, x.headers = nil, destList{}, nil, nil
	x.ring, x.modulus, x.random = hashRing{}, modulusSlots{}, destList{}
	switch x.Kind {
	case Direct:
		x.direct = make(map[string]*destList)
	case Topic:
		x.topic = &topicNode{}
	}
}

// DeclareExchange adds e, or replaces the exchange of that name, keeping its
// bindings. Whether a redeclaration is allowed (same kind and flags,
// reserved names, passive declares) is the broker's decision, made before
// it calls here; if the kind does change, the bindings are re-indexed for
// the new kind. The default exchange cannot be declared
// (ErrDefaultExchange): DeclareDefaults creates it.
func (t *Table) DeclareExchange(e Exchange) error {
	if e.Name == "" {
		return ErrDefaultExchange
	}
	if !e.Kind.valid() {
		return fmt.Errorf("%w: %v", ErrUnknownKind, e.Kind)
	}
	t.lazyInit()
	x, ok := t.exchanges[e.Name]
	if !ok {
		t.exchanges[e.Name] = newExchange(e)
		return nil
	}
	oldKind := x.Kind
	x.Exchange = e
	if e.Kind != oldKind {
		x.resetIndex()
		for b := range x.out {
			b.hm = nil
			if e.Kind == Headers {
				b.hm, _ = compileHeaders(b.Args, false) // lenient: never fails
			}
			x.indexAdd(b)
		}
	}
	return nil
}

// Exchange returns the exchange named name. The default exchange is
// Exchange{Name: "", Kind: Direct} once DeclareDefaults has run.
func (t *Table) Exchange(name string) (Exchange, bool) {
	x, ok := t.exchanges[name]
	if !ok {
		return Exchange{}, false
	}
	return x.Exchange, true
}

// Exchanges lists every exchange, sorted by name.
func (t *Table) Exchanges() []Exchange {
	out := make([]Exchange, 0, len(t.exchanges))
	for _, x := range t.exchanges {
		out = append(out, x.Exchange)
	}
	slices.SortFunc(out, func(a, b Exchange) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// DeleteExchange removes the exchange and every binding where it is the
// source or the destination, and returns those bindings (sorted as
// Bindings sorts). Exchanges that name it as their alternate exchange keep
// the name. It fails with ErrDefaultExchange for "" and
// ErrExchangeNotFound for a missing exchange; refusing to delete amq.*
// exchanges is the broker's call.
func (t *Table) DeleteExchange(name string) (removed []Binding, err error) {
	if name == "" {
		return nil, ErrDefaultExchange
	}
	x, ok := t.exchanges[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrExchangeNotFound, name)
	}
	doomed := make([]*binding, 0, len(x.out)+len(x.in))
	for b := range x.out {
		doomed = append(doomed, b)
	}
	for b := range x.in {
		if _, self := x.out[b]; !self { // a self-binding is in both sets
			doomed = append(doomed, b)
		}
	}
	removed = t.removeBindings(doomed)
	delete(t.exchanges, name)
	return removed, nil
}

// AddQueue makes a queue known, so the default exchange routes to it and
// bindings may name it. Adding a known queue does nothing.
func (t *Table) AddQueue(name string) {
	t.lazyInit()
	if _, ok := t.queues[name]; !ok {
		t.queues[name] = &queue{in: make(map[*binding]struct{})}
	}
}

// HasQueue reports whether AddQueue added name (and RemoveQueue has not
// removed it since).
func (t *Table) HasQueue(name string) bool {
	_, ok := t.queues[name]
	return ok
}

// RemoveQueue forgets a queue and removes every binding to it, returning
// those bindings (sorted as Bindings sorts). Removing an unknown queue
// returns nil.
func (t *Table) RemoveQueue(name string) (removed []Binding) {
	q, ok := t.queues[name]
	if !ok {
		return nil
	}
	doomed := make([]*binding, 0, len(q.in))
	for b := range q.in {
		doomed = append(doomed, b)
	}
	delete(t.queues, name)
	t.queues = shrinkMap(t.queues, &t.queuesPeak)
	return t.removeBindings(doomed)
}

// endpoints resolves a binding's source and destination. It refuses the
// default exchange at either end, as RabbitMQ does for bind and unbind.
func (t *Table) endpoints(b *Binding) (src, destX *exchange, q *queue, err error) {
	if b.Source == "" || (b.Destination.Exchange && b.Destination.Name == "") {
		return nil, nil, nil, ErrDefaultExchange
	}
	src, ok := t.exchanges[b.Source]
	if !ok {
		return nil, nil, nil, fmt.Errorf("%w: %q", ErrExchangeNotFound, b.Source)
	}
	if b.Destination.Exchange {
		if destX, ok = t.exchanges[b.Destination.Name]; !ok {
			return nil, nil, nil, fmt.Errorf("%w: %q", ErrExchangeNotFound, b.Destination.Name)
		}
		return src, destX, nil, nil
	}
	if q, ok = t.queues[b.Destination.Name]; !ok {
		return nil, nil, nil, fmt.Errorf("%w: %q", ErrQueueNotFound, b.Destination.Name)
	}
	return src, nil, q, nil
}

// Bind adds b. It reports added=false, and changes nothing, when an
// identical binding exists. Errors: ErrDefaultExchange when either end is
// the default exchange, ErrExchangeNotFound / ErrQueueNotFound for a
// missing end, ErrInvalidBinding for a bad x-match on a headers exchange, a
// consistent-hash key that is no weight, a local-random binding with a key
// or to an exchange, or arguments no field table can hold.
// The table keeps a copy of the top level of b.Args; nested values are
// shared and must not be changed afterwards.
func (t *Table) Bind(b Binding) (added bool, err error) {
	src, destX, q, err := t.endpoints(&b)
	if err != nil {
		return false, err
	}
	id, err := idOf(&b)
	if err != nil {
		return false, err
	}
	if _, ok := t.bindings[id]; ok {
		return false, nil
	}
	nb := &binding{id: id, destX: destX}
	if src.Kind == ConsistentHash {
		if _, err := parseWeight(b.Key); err != nil {
			return false, err
		}
	}
	if src.Kind == Headers {
		if nb.hm, err = compileHeaders(b.Args, true); err != nil {
			return false, err
		}
	}
	if src.Kind == LocalRandom {
		if err := checkLocalRandom(&b); err != nil {
			return false, err
		}
	}
	nb.Binding = b
	if len(b.Args) == 0 {
		nb.Args = nil
	} else {
		nb.Args = maps.Clone(b.Args)
	}
	t.bindings[id] = nb
	src.out[nb] = struct{}{}
	if destX != nil {
		destX.in[nb] = struct{}{}
	} else {
		q.in[nb] = struct{}{}
	}
	src.indexAdd(nb)
	return true, nil
}

// Unbind removes the binding identical to b (same source, destination, key
// and arguments) and reports whether there was one; unbinding a binding
// that does not exist is not an error (RabbitMQ 3.x+). Its errors are
// Bind's: the default exchange at either end, a missing end, or arguments
// no field table can hold.
func (t *Table) Unbind(b Binding) (removed bool, err error) {
	if _, _, _, err := t.endpoints(&b); err != nil {
		return false, err
	}
	id, err := idOf(&b)
	if err != nil {
		return false, err
	}
	nb, ok := t.bindings[id]
	if !ok {
		return false, nil
	}
	t.removeBindings([]*binding{nb})
	return true, nil
}

// removeBindings unlinks bs from every index and returns their public form,
// sorted as Bindings sorts.
func (t *Table) removeBindings(bs []*binding) []Binding {
	if len(bs) == 0 {
		return nil
	}
	for _, b := range bs {
		delete(t.bindings, b.id)
		t.bindings = shrinkMap(t.bindings, &t.bindingsPeak)
		if src, ok := t.exchanges[b.Source]; ok {
			delete(src.out, b)
			src.out = shrinkMap(src.out, &src.outPeak)
			src.indexRemove(b)
		}
		if b.destX != nil {
			delete(b.destX.in, b)
			b.destX.in = shrinkMap(b.destX.in, &b.destX.inPeak)
		} else if q, ok := t.queues[b.Destination.Name]; ok {
			delete(q.in, b)
		}
	}
	return publicSorted(bs)
}

// Bindings lists every binding, sorted by source, destination (queues
// before exchanges), key and arguments. Args maps are the table's own:
// read them, do not change them.
func (t *Table) Bindings() []Binding {
	bs := make([]*binding, 0, len(t.bindings))
	for _, b := range t.bindings {
		bs = append(bs, b)
	}
	return publicSorted(bs)
}

// publicSorted sorts bs by identity (so the order is total and stable from
// call to call) and returns their public form.
func publicSorted(bs []*binding) []Binding {
	slices.SortFunc(bs, func(a, b *binding) int {
		x, y := &a.id, &b.id
		c := strings.Compare(x.source, y.source)
		if c == 0 && x.dest.exchange != y.dest.exchange {
			c = -1
			if x.dest.exchange {
				c = 1
			}
		}
		return cmp.Or(c,
			strings.Compare(x.dest.name, y.dest.name),
			strings.Compare(x.key, y.key),
			strings.Compare(x.args, y.args))
	})
	out := make([]Binding, len(bs))
	for i, b := range bs {
		out[i] = b.Binding
	}
	return out
}

// SourceBindings returns how many bindings have exchange as their source
// (0 for a missing exchange). An auto-delete exchange goes when this drops
// to zero.
func (t *Table) SourceBindings(exchange string) int {
	if x, ok := t.exchanges[exchange]; ok {
		return len(x.out)
	}
	return 0
}

// EmptiedSources returns, sorted and without repeats, the sources of the
// removed bindings that still exist and now have no binding as source: the
// exchanges an auto-delete check must look at after Unbind, RemoveQueue or
// DeleteExchange. Deleting such an exchange removes more bindings, so the
// broker repeats until this returns nothing, as RabbitMQ's auto-delete
// cascades.
func (t *Table) EmptiedSources(removed []Binding) []string {
	var out []string
	done := make(map[string]bool)
	for i := range removed {
		name := removed[i].Source
		if done[name] {
			continue
		}
		done[name] = true
		if x, ok := t.exchanges[name]; ok && len(x.out) == 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// indexAdd puts b into the routing index of its source x.
func (x *exchange) indexAdd(b *binding) {
	k := b.id.dest
	switch x.Kind {
	case Direct:
		l := x.direct[b.Key]
		if l == nil {
			l = &destList{}
			x.direct[b.Key] = l
		}
		l.add(k, b.destX)
	case Fanout:
		x.fanout.add(k, b.destX)
	case Topic:
		topicInsert(x.topic, b.Key, k, b.destX)
	case Headers:
		x.headers = append(x.headers, b)
	case ConsistentHash:
		// Bind checked the weight; a binding indexed again after a kind
		// change may not have one, and then holds no bucket.
		if w, err := parseWeight(b.Key); err == nil {
			x.ring.add(b, w)
		}
	case ModulusHash:
		x.modulus.add(b)
	case LocalRandom:
		if localRandomIndexed(b) {
			x.random.add(k, nil)
		}
	}
}

// indexRemove takes b out of the routing index of its source x.
func (x *exchange) indexRemove(b *binding) {
	k := b.id.dest
	switch x.Kind {
	case Direct:
		if l := x.direct[b.Key]; l != nil && l.remove(k) {
			delete(x.direct, b.Key)
			x.direct = shrinkMap(x.direct, &x.directPeak)
		}
	case Fanout:
		x.fanout.remove(k)
	case Topic:
		topicRemove(x.topic, b.Key, k)
	case Headers:
		if i := slices.Index(x.headers, b); i >= 0 {
			x.headers = slices.Delete(x.headers, i, i+1)
		}
	case ConsistentHash:
		x.ring.remove(b)
	case ModulusHash:
		x.modulus.remove(b)
	case LocalRandom:
		if localRandomIndexed(b) {
			x.random.remove(k)
		}
	}
}
