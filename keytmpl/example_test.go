package keytmpl_test

import (
	"errors"
	"fmt"

	"github.com/dlock-go/dlock/keytmpl"
)

func ExampleParse() {
	tpl, err := keytmpl.Parse("order:{a}:{b}")
	if err != nil {
		panic(err)
	}
	for _, vals := range []map[string]string{{"a": "1:2", "b": "3"}, {"a": "1", "b": "2:3"}} {
		key, _ := tpl.Key(func(p keytmpl.Placeholder) string { return vals[p.Name] })
		fmt.Println(key)
	}

	_, err = keytmpl.Parse("order:{orderId")
	fmt.Println(err)
	fmt.Println(errors.Is(err, keytmpl.ErrSyntax))
	// Output:
	// order:1%3A2:3
	// order:1:2%3A3
	// keytmpl: parsing "order:{orderId": at offset 6: unclosed '{'
	// true
}
