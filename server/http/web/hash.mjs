/* The location hash kept in step with the view (url_state.mjs makes it). */
import { jobs } from './jobs_view.mjs';
import { state } from './state.mjs';
import { hashFor } from './url_state.mjs';

export function writeHash() {
  const hash = hashFor({ job: jobs.selected, capture: state.capture, query: state.query, record: state.record });
  if (hash !== location.hash) history.replaceState(null, '', hash || location.pathname + location.search);
}
