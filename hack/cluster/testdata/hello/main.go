// Command hello is the smoke test's workload: an HTTPS server (the
// certificate and key in /tls) that answers GET / with "hello" and serves a
// validating admission webhook at /validate that refuses every object with
// a fixed message. It uses the standard library only, so that its image is
// one small static binary.
package main

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
)

// Refusal is the webhook's message, which the smoke test looks for.
const Refusal = "refused by the smoke test's webhook"

type admissionReview struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Request    *admissionRequest  `json:"request,omitempty"`
	Response   *admissionResponse `json:"response,omitempty"`
}

type admissionRequest struct {
	UID string `json:"uid"`
}

type admissionResponse struct {
	UID     string  `json:"uid"`
	Allowed bool    `json:"allowed"`
	Result  *status `json:"status,omitempty"`
}

type status struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func main() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "hello")
	})
	mux.HandleFunc("POST /validate", func(w http.ResponseWriter, r *http.Request) {
		var review admissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "want an AdmissionReview", http.StatusBadRequest)
			return
		}
		review.Response = &admissionResponse{
			UID:    review.Request.UID,
			Result: &status{Code: http.StatusForbidden, Message: Refusal},
		}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(review)
	})
	log.Fatal(http.ListenAndServeTLS(":8443", "/tls/tls.crt", "/tls/tls.key", mux))
}
