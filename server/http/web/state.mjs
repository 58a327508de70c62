/*
 * What the page shows, in one object the views share: the captures list,
 * the selected capture, the applied filters and the args page, the
 * selected record and what its canvases show. Each listing's `gen` is
 * bumped when it starts over, so a late answer to an older request is
 * dropped.
 */
import { emptyFilters } from './filters.mjs';
import { PageTokens } from './paging.mjs';

export const state = {
  caps: { pages: new PageTokens(), items: [], gen: 0, filter: { state: '', label: '' } },
  capture: null,          // selected capture name
  summary: null,          // its CaptureSummary, when known
  kernels: new Map(),     // its kernel table: func_id -> Kernel (from GetCapture)
  query: emptyFilters(),  // the filters of the args table (as applied)
  args: { pages: new PageTokens(), items: [], gen: 0, loading: false, loaded: false },
  record: null,           // { id, arg: CapturedArg|null, index: number[]|null }
  recGen: 0,              // bumped whenever the record view starts over
  view: null,             // what the heatmap shows, for hovering
  diffView: null,         // what the diff canvas shows
};

export const isLive = () => !!state.summary && state.summary.state === 'CAPTURE_STATE_LIVE';
