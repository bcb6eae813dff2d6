// Prints the top-level fields of the kubelet's config file (KubeletConfiguration,
// kubelet.config.k8s.io/v1beta1) as the kubelet's own Go type declares them: one line per JSON
// name, a tab, and the JSON kind the kubelet decodes into it (bool, integer, number, string,
// array, object). It rebuilds src/base/kubelet_fields.tsv:
//
//	cd tools/kubelet-fields && go run . > ../../src/base/kubelet_fields.tsv
package main

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

var (
	duration = reflect.TypeOf(metav1.Duration{})
	quantity = reflect.TypeOf(resource.Quantity{})
)

// kind is the JSON kind the decoder takes for a Go type.
func kind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == duration {
		return "duration"
	}
	if t == quantity {
		return "string"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return "any"
}

// fields adds the JSON fields of struct t, inlined members' among them.
func fields(t reflect.Type, out map[string]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") || (f.Anonymous && name == "") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			fields(ft, out)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = kind(f.Type)
	}
}

func main() {
	out := map[string]string{}
	fields(reflect.TypeOf(kubeletv1beta1.KubeletConfiguration{}), out)
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Println("# KubeletConfiguration (kubelet.config.k8s.io/v1beta1) of k8s.io/kubelet, tools/kubelet-fields")
	for _, n := range names {
		fmt.Printf("%s\t%s\n", n, out[n])
	}
}
