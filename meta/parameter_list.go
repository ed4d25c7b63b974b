package meta

import (
	"cmp"
	"slices"
)

// SelectParameters returns the parameters of ps that ListParameters(ctx,
// component, vhost) returns ("" matching any), sorted as it sorts them.
// The stores share it so that they filter and order alike.
func SelectParameters(ps []Parameter, component, vhost string) []Parameter {
	out := make([]Parameter, 0, len(ps))
	for _, p := range ps {
		if (component == "" || p.Component == component) && (vhost == "" || p.VHost == vhost) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Parameter) int {
		return cmp.Or(cmp.Compare(a.Component, b.Component), cmp.Compare(a.VHost, b.VHost), cmp.Compare(a.Name, b.Name))
	})
	return out
}
