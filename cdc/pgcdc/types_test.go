package pgcdc_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/varve-go/varve/cdc/pgcdc"
)

// typeCases are the column types teams use, each with a literal and the
// value it must decode to.
var typeCases = []struct {
	name, sqlType, literal string
	want                   any
}{
	{"smallint", "smallint", "-32768", int16(-32768)},
	{"int", "int", "2147483647", int32(2147483647)},
	{"bigint", "bigint", "-9223372036854775808", int64(-9223372036854775808)},
	{"bool", "boolean", "true", true},
	{"float8", "double precision", "0.1", 0.1},
	{"text", "text", `E'h\u00e9llo ''quoted''\n\ttab'`, "héllo 'quoted'\n\ttab"},
	{"varchar", "varchar(20)", "'short'", "short"},
	{"numeric", "numeric", "'12345678901234567890.000000000123456789'", "12345678901234567890.000000000123456789"},
	{"numeric negative scale", "numeric(10,2)", "'-0.50'", "-0.50"},
	{"numeric NaN", "numeric", "'NaN'", "NaN"},
	{"timestamptz", "timestamptz", "'2024-02-29 23:59:59.123456+05:30'", time.Date(2024, 2, 29, 18, 29, 59, 123456000, time.UTC)},
	{"timestamptz infinity", "timestamptz", "'infinity'", pgtype.Infinity},
	{"date", "date", "'1999-12-31'", time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC)},
	{"uuid", "uuid", "'0190a6e4-8f6e-7c3a-9b1d-2f4e5a6b7c8d'", uuid.MustParse("0190a6e4-8f6e-7c3a-9b1d-2f4e5a6b7c8d")},
	{"jsonb", "jsonb", `'{"b": [1, 2.50, "x", 12345678901234567890], "a": null}'`, json.RawMessage(`{"a": null, "b": [1, 2.50, "x", 12345678901234567890]}`)},
	{"json", "json", `'{"b":1,  "a":[true]}'`, json.RawMessage(`{"b":1,  "a":[true]}`)},
	{"bytea", "bytea", `'\x00ff10'`, []byte{0, 0xff, 0x10}},
	{"int array", "int[]", "'{1,NULL,3}'", []any{int32(1), nil, int32(3)}},
	{"text array", "text[]", `'{"a b","c,d",""}'`, []any{"a b", "c,d", ""}},
	{"uuid array", "uuid[]", "'{0190a6e4-8f6e-7c3a-9b1d-2f4e5a6b7c8d}'", []any{[16]byte(uuid.MustParse("0190a6e4-8f6e-7c3a-9b1d-2f4e5a6b7c8d"))}},
	{"empty array", "int[]", "'{}'", []any{}},
	{"array from 0", "int[]", "'[0:1]={7,8}'", pgtype.Array[any]{Elements: []any{int32(7), int32(8)},
		Dims: []pgtype.ArrayDimension{{Length: 2, LowerBound: 0}}, Valid: true}},
	{"2-d array", "int[][]", "'{{1,2},{3,4}}'", pgtype.Array[any]{Elements: []any{int32(1), int32(2), int32(3), int32(4)},
		Dims: []pgtype.ArrayDimension{{Length: 2, LowerBound: 1}, {Length: 2, LowerBound: 1}}, Valid: true}},
}

func equal(got, want any) error {
	switch w := want.(type) {
	case time.Time:
		g, ok := got.(time.Time)
		if !ok || !g.Equal(w) {
			return fmt.Errorf("got %#v, want %v", got, w)
		}
		return nil
	case pgtype.InfinityModifier:
		g, ok := got.(pgtype.InfinityModifier)
		if !ok || g != w {
			return fmt.Errorf("got %#v, want %v", got, w)
		}
		return nil
	}
	if n, ok := got.(pgtype.Numeric); ok {
		b, err := n.MarshalJSON()
		if err != nil {
			return err
		}
		if s := strings.Trim(string(b), `"`); s != want {
			return fmt.Errorf("numeric %s, want %v", s, want)
		}
		return nil
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("got %#v (%T), want %#v (%T)", got, got, want, want)
	}
	return nil
}

func TestTypesRoundTrip(t *testing.T) {
	for _, binary := range []bool{false, true} {
		t.Run(fmt.Sprintf("binary=%v", binary), func(t *testing.T) {
			cols := []string{"id int PRIMARY KEY"}
			vals := []string{"1"}
			for i, c := range typeCases {
				cols = append(cols, fmt.Sprintf("c%d %s", i, c.sqlType))
				vals = append(vals, c.literal)
			}
			f := newFixture(t, "CREATE TABLE types ("+strings.Join(cols, ", ")+")")
			cfg := f.config("types")
			cfg.Binary = binary
			s := f.start(cfg)
			f.exec("INSERT INTO types VALUES (" + strings.Join(vals, ", ") + ")")
			f.exec("INSERT INTO types (id) VALUES (2)")

			tx := next(t, s)
			row := tx.Changes[0].New
			for i, c := range typeCases {
				v := row[i+1]
				if v.Name != fmt.Sprintf("c%d", i) || v.Unchanged {
					t.Errorf("%s: column %+v", c.name, v)
				}
				if err := equal(v.Value, c.want); err != nil {
					t.Errorf("%s (%s): %v", c.name, c.sqlType, err)
				}
			}
			tx = next(t, s)
			for i, v := range tx.Changes[0].New[1:] {
				if v.Value != nil || v.Unchanged {
					t.Errorf("%s NULL decoded as %+v", typeCases[i].name, v)
				}
			}
		})
	}
}

func TestUnknownTypeIsAnErrorNamingTableAndColumn(t *testing.T) {
	f := newFixture(t, "CREATE TYPE mood AS ENUM ('sad', 'happy')", "CREATE TABLE moods (id int PRIMARY KEY, feeling mood)")
	s := f.start(f.config("moods"))
	f.exec("INSERT INTO moods VALUES (1, 'happy')")
	_, err := s.Next(t.Context())
	var de *pgcdc.DecodeError
	if !errors.As(err, &de) || de.Table != "moods" || de.Column != "feeling" || de.Schema != f.name {
		t.Fatalf("Next = %v, want a DecodeError on %s.moods.feeling", err, f.name)
	}
	if !strings.Contains(err.Error(), f.name+".mood") || !strings.Contains(err.Error(), "UnknownTypesAsText") {
		t.Errorf("error %q should name the type and the way out", err)
	}
	if err := s.Close(); !errors.As(err, &de) {
		t.Errorf("Close = %v, want the decode error", err)
	}

	// With UnknownTypesAsText the same change arrives as text.
	cfg := f.config("moods")
	cfg.UnknownTypesAsText = true
	s = f.start(cfg)
	tx := next(t, s)
	if got := tx.Changes[0].New[1].Value; got != "happy" {
		t.Errorf("enum as text: %#v", got)
	}
}
