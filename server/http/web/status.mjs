/*
 * The page's status line: the current error of each source (captures,
 * args, tensor, ...). A source's success clears only its own error;
 * #status shows the latest one left, body[data-error] too.
 */
import { $ } from './dom.mjs';

/** An API failure, already phrased as "STATUS: message". */
export class ApiError extends Error {
  constructor(message, httpStatus = 0) { super(message); this.name = 'ApiError'; this.httpStatus = httpStatus; }
}

export const errMsg = (e) => (e instanceof ApiError ? e.message : `INTERNAL: ${(e && e.message) || e}`);

const errors = new Map();

export function setError(source, err) {
  errors.delete(source);
  if (err) errors.set(source, typeof err === 'string' ? err : errMsg(err));
  const all = [...errors.values()];
  const last = all.length ? all[all.length - 1] : '';
  const status = $('status');
  status.textContent = last;
  status.title = all.join('\n');
  status.classList.toggle('error', last !== '');
  document.body.dataset.error = last;
}

/** Forgets every source's error (the status line is redrawn by the next setError). */
export function clearErrors() { errors.clear(); }
