/*
 * capture_server's JSON API (/v1/..., same origin) as the page calls it:
 * GETs with the bearer token, every failure an ApiError, body[data-state]
 * 'loading' while calls are in flight. The token lives in sessionStorage
 * (in memory only when storage is disabled).
 */
import { ApiError } from './status.mjs';
import { apiUrl } from './url_state.mjs';

const TOKEN_KEY = 'argsdump.token';
const enc = encodeURIComponent;

let inFlight = 0;
let onUnauthorized = () => {};

function setBusy(delta) {
  inFlight += delta;
  document.body.dataset.state = inFlight > 0 ? 'loading' : 'idle';
}

let token = (() => { try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (_) { return ''; } })();

export const getToken = () => token;

export function setToken(value) {
  token = value;
  try {
    if (value) sessionStorage.setItem(TOKEN_KEY, value); else sessionStorage.removeItem(TOKEN_KEY);
  } catch (_) { /* storage disabled: the token lasts until the page is reloaded */ }
}

/** What a 401 answer does besides failing (the page shows its token form). */
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

/** GETs a JSON object from the API; throws ApiError on any failure. */
export async function api(path, params) {
  const headers = { Accept: 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  setBusy(+1);
  try {
    let resp, text;
    try {
      resp = await fetch(apiUrl(path, params), { headers, cache: 'no-store' });
      text = await resp.text();
    } catch (e) {
      throw new ApiError(`UNAVAILABLE: network error: ${(e && e.message) || e}`);
    }
    let body, parsed = false;
    try { body = JSON.parse(text); parsed = true; } catch (_) { /* reported below */ }
    if (!resp.ok) {
      if (resp.status === 401) onUnauthorized();
      if (parsed && body && typeof body === 'object' && (body.status || body.message)) {
        throw new ApiError(`${body.status || `HTTP_${resp.status}`}: ${body.message || ''}`, resp.status);
      }
      throw new ApiError(`HTTP ${resp.status}: ${text.slice(0, 200) || resp.statusText}`, resp.status);
    }
    if (!parsed || !body || typeof body !== 'object') {
      throw new ApiError(`INTERNAL: ${path}: the response is not a JSON object`, resp.status);
    }
    return body;
  } finally {
    setBusy(-1);
  }
}

export const capturePath = (name) => `v1/captures/${enc(name)}`;
export const argPath = (name, id) => `${capturePath(name)}/args/${enc(id)}`;
