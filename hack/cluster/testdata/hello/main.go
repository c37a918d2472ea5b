// Command hello is the smoke test's workload: an HTTPS server (the
// certificate and key in /tls) that answers GET / with "hello", GET
// /kubernetes with kube-apiserver's /version as the pod reads it through the
// kubernetes Service with its ServiceAccount token (the in-cluster
// configuration every controller uses), GET /get?url=URL with what a plain
// GET of URL answers (a server on the host, seen from a pod), and serves a validating admission
// webhook at /validate that refuses every object with a fixed message. It
// uses the standard library only, so that its image is one small static
// binary.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"
)

// serviceAccount is where the kubelet mounts the pod's token and the
// cluster's CA.
const serviceAccount = "/var/run/secrets/kubernetes.io/serviceaccount/"

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
	mux.HandleFunc("GET /kubernetes", func(w http.ResponseWriter, r *http.Request) {
		status, body, err := apiServerVersion()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	})
	mux.HandleFunc("GET /get", func(w http.ResponseWriter, r *http.Request) {
		c := &http.Client{Timeout: 5 * time.Second}
		res, err := c.Get(r.URL.Query().Get("url"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		w.WriteHeader(res.StatusCode)
		_, _ = io.Copy(w, res.Body)
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

// apiServerVersion reads /version from kube-apiserver the in-cluster way.
func apiServerVersion() (int, []byte, error) {
	token, err := os.ReadFile(serviceAccount + "token")
	if err != nil {
		return 0, nil, err
	}
	caPEM, err := os.ReadFile(serviceAccount + "ca.crt")
	if err != nil {
		return 0, nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")) + "/version"
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+string(token))
	res, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res.StatusCode, body, err
}
