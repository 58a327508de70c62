/*
 * argsdump capture browser: the page's entry module (index.html loads it
 * with <script type="module">).
 *
 * Drives index.html against capture_server's JSON API (/v1/..., same origin):
 * a paged list of captures (captures_view.mjs), a filtered and paged table of
 * the selected capture's records (args_view.mjs; the filter form is built from
 * the server's filter schema, GET v1/schema), and a view of the selected record
 * (record_view.mjs, diff_view.mjs): header, stats, a heatmap of a 2-D slice, a
 * histogram and, for inout args, the after - before difference. The selection
 * and the filters live in location.hash so a view can be shared
 * (url_state.mjs). Plain ES2020 modules without dependencies; the pure ones
 * (format, colour, filters, url_state, paging, geometry) are unit-tested
 * with node --test (web_test/).
 */
import { init } from './main.mjs';

init();
